// Least-significant-digit radix sort by a 64-bit key, 11 bits a pass, skipping the passes whose
// digit every key shares (a run's latencies or gaps differ only in their low bits): a few linear
// passes where std::sort would compare n log n times, the digits' counts all taken in the first.
// Stable.
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
  // One pass counts every digit's values (and finds the bits every key shares); then one pass
  // moves the elements per digit that differs.
  constexpr int kDigits = 6;  // of 11 bits: 66 >= 64
  std::vector<std::array<size_t, 2049>> start(kDigits);  // per digit: counts, then first places
  uint64_t all = ~uint64_t{0}, any = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = key(data[i]);
    all &= k;
    any |= k;
    for (int d = 0; d < kDigits; ++d) ++start[static_cast<size_t>(d)][((k >> (11 * d)) & 2047) + 1];
  }
  const uint64_t differ = all ^ any;  // the bits that are not the same in every key
  scratch.resize(n);
  T* from = data;
  T* to = scratch.data();
  for (int d = 0; d < kDigits; ++d) {
    const int shift = 11 * d;
    if (((differ >> shift) & 2047) == 0) continue;
    std::array<size_t, 2049>& at = start[static_cast<size_t>(d)];
    for (size_t v = 1; v < at.size(); ++v) at[v] += at[v - 1];
    for (size_t i = 0; i < n; ++i) to[at[(key(from[i]) >> shift) & 2047]++] = from[i];
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
