// Least-significant-digit radix sort by a 64-bit key, 11 bits a pass, skipping the passes whose
// digit every key shares (a run's latencies or gaps differ only in their low bits): a few linear
// passes where std::sort would compare n log n times. Stable.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace servesim {

// Sorts data[0, n) by key(element) (a uint64_t), ascending; scratch is reused memory.
template <typename T, typename Key>
void radix_sort(T* data, size_t n, std::vector<T>& scratch, Key key) {
  if (n < 512) {
    std::stable_sort(data, data + n, [&](const T& a, const T& b) { return key(a) < key(b); });
    return;
  }
  uint64_t all = ~uint64_t{0}, any = 0;
  for (size_t i = 0; i < n; ++i) {
    all &= key(data[i]);
    any |= key(data[i]);
  }
  const uint64_t differ = all ^ any;  // the bits that are not the same in every key
  scratch.resize(n);
  T* from = data;
  T* to = scratch.data();
  for (int shift = 0; shift < 64; shift += 11) {
    if (((differ >> shift) & 2047) == 0) continue;
    std::array<size_t, 2049> start{};
    for (size_t i = 0; i < n; ++i) ++start[((key(from[i]) >> shift) & 2047) + 1];
    for (size_t d = 1; d < start.size(); ++d) start[d] += start[d - 1];
    for (size_t i = 0; i < n; ++i) to[start[(key(from[i]) >> shift) & 2047]++] = from[i];
    std::swap(from, to);
  }
  if (from != data) std::copy(from, from + n, data);
}

// A double's bits as a key that orders as the double does (negative values too; not NaN).
inline uint64_t double_order_key(double v) {
  const auto u = std::bit_cast<uint64_t>(v);
  return (u >> 63) != 0 ? ~u : u | (uint64_t{1} << 63);
}

}  // namespace servesim
