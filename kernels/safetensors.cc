#include "kernels/safetensors.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "sim/config/json_text.h"
#include "sim/config/toml_fields.h"

namespace servesim {

using nlohmann::json;

// ---- conversions -------------------------------------------------------------------------------

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant x 2^-24, exact in float32
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

// Shifts `m` right by `shift` (1..31), rounding to nearest, ties to even.
static uint32_t shift_round_even(uint32_t m, uint32_t shift) {
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return (rem > half || (rem == half && (q & 1u))) ? q + 1 : q;
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t absx = x & 0x7fffffffu;
  const uint32_t exp = absx >> 23;
  const uint32_t mant = absx & 0x7fffffu;
  if (exp == 0xff) {  // inf stays inf; NaN stays a quiet NaN with the top payload bits
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  }
  if (exp > 142) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16: infinity
  if (exp >= 113) {  // normal in fp16 (exponent 1..30); a carry may round up to the next binade/inf
    const uint32_t bits = ((exp - 112) << 23 | mant);  // fp16 exponent and mantissa, 13 extra bits
    return static_cast<uint16_t>(sign | shift_round_even(bits, 13));
  }
  // Subnormal in fp16: the value is m x 2^(exp-150), in units of 2^-24 that is m >> (126 - exp).
  if (exp < 102) return sign;  // below 2^-25: rounds to zero
  const uint32_t m = mant | 0x800000u;  // exp >= 102 > 0, so the implicit bit is there
  return static_cast<uint16_t>(sign | shift_round_even(m, 126 - exp));  // may round up to 0x400
}

float bf16_to_fp32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);  // overflow carries to inf
}

// ---- header ------------------------------------------------------------------------------------

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<SafetensorsHeader> parse_safetensors_header(const std::string& json_text, uint64_t data_size,
                                                   const std::string& where) {
  json j;
  if (const auto failure = parse_json(json_text, j)) {
    return Error{where + ": the header is not valid JSON (" + failure->message + ")"};
  }
  if (!j.is_object()) return Error{where + ": the header is not a JSON object"};
  SafetensorsHeader h;
  for (const auto& [name, e] : j.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) return Error{where + ": '__metadata__' is not an object"};
      for (const auto& [k, v] : e.items()) {
        if (v.is_string()) h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string at = where + ": tensor '" + name + "': ";
    if (!e.is_object()) return Error{at + "entry is not an object"};
    SafetensorsEntry t;
    const auto dtype = e.find("dtype");
    if (dtype == e.end() || !dtype->is_string()) return Error{at + "'dtype' is missing or not a string"};
    t.dtype = dtype->get<std::string>();
    const auto shape = e.find("shape");
    if (shape == e.end() || !shape->is_array()) return Error{at + "'shape' is missing or not an array"};
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()})
        return Error{at + "'shape' holds something other than a non-negative integer"};
      t.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    const auto off = e.find("data_offsets");
    if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      return Error{at + "'data_offsets' is not a pair of non-negative integers"};
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.begin > t.end || t.end > data_size)
      return Error{at + "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                   "] lie outside the " + std::to_string(data_size) + " bytes of data (truncated file?)"};
    h.tensors.emplace(name, std::move(t));
  }
  return h;
}

// ---- reading -----------------------------------------------------------------------------------

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  if (Status s = check_readable_file(path); !s.ok()) return s.error();
  SafetensorsFile f;
  f.path_ = path;
  f.in_.open(path, std::ios::binary);
  if (!f.in_) return Error{path + ": cannot open the file"};
  f.in_.seekg(0, std::ios::end);
  const std::streamoff size = f.in_.tellg();
  f.in_.seekg(0, std::ios::beg);
  if (size < 8) return Error{path + ": too short for a safetensors file (" + std::to_string(size) + " bytes)"};
  unsigned char len_bytes[8];
  if (!f.in_.read(reinterpret_cast<char*>(len_bytes), 8)) return Error{path + ": cannot read the header length"};
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  const auto file_size = static_cast<uint64_t>(size);
  if (n == 0 || n > file_size - 8)
    return Error{path + ": header length " + std::to_string(n) + " does not fit the file's " +
                 std::to_string(file_size) + " bytes (not a safetensors file, or truncated)"};
  if (n > kMaxSafetensorsHeaderBytes)  // the format's own limit
    return Error{path + ": header length " + std::to_string(n) + " exceeds the format's limit of " +
                 std::to_string(kMaxSafetensorsHeaderBytes) + " bytes (not a safetensors file?)"};
  std::string text(n, '\0');
  if (!f.in_.read(text.data(), static_cast<std::streamsize>(n))) return Error{path + ": cannot read the header"};
  auto header = parse_safetensors_header(text, file_size - 8 - n, path);
  if (!header) return header.error();
  f.header_ = std::move(header).value();
  f.data_start_ = 8 + n;
  return f;
}

Result<std::vector<float>> SafetensorsFile::read_f32(const std::string& name) {
  const std::string at = path_ + ": tensor '" + name + "': ";
  const auto it = header_.tensors.find(name);
  if (it == header_.tensors.end()) return Error{at + "not in the file"};
  const SafetensorsEntry& e = it->second;
  uint64_t elem = 0;
  if (e.dtype == "F32") elem = 4;
  else if (e.dtype == "F16" || e.dtype == "BF16") elem = 2;
  else return Error{at + "dtype '" + e.dtype + "' is not supported (F32, F16 or BF16)"};
  const uint64_t bytes = e.end - e.begin;
  uint64_t numel = 1;
  for (const int64_t d : e.shape) {
    const auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && numel > bytes / ud) {  // already more elements than the bytes could hold
      numel = std::numeric_limits<uint64_t>::max();
      break;
    }
    numel *= ud;
  }
  if (numel == std::numeric_limits<uint64_t>::max() || numel * elem != bytes)
    return Error{at + "shape " + shape_string(e.shape) + " of " + e.dtype + " does not match its " +
                 std::to_string(bytes) + " bytes"};
  std::vector<unsigned char> raw(bytes);
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  if (!in_.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(bytes)))
    return Error{at + "cannot read its data"};
  std::vector<float> out(numel);
  for (uint64_t i = 0; i < numel; ++i) {
    const unsigned char* p = raw.data() + i * elem;
    if (elem == 4) {
      const uint32_t u = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
      out[i] = std::bit_cast<float>(u);
    } else {
      const auto u = static_cast<uint16_t>(p[0] | p[1] << 8);
      out[i] = e.dtype == "F16" ? fp16_to_fp32(u) : bf16_to_fp32(u);
    }
  }
  return out;
}

// ---- writing -----------------------------------------------------------------------------------

Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors, DType dtype,
                         const std::map<std::string, std::string>& metadata) {
  const char* tag = dtype == DType::kFp32 ? "F32" : dtype == DType::kFp16 ? "F16"
                    : dtype == DType::kBf16 ? "BF16" : nullptr;
  if (!tag) return Error{path + ": cannot write " + dtype_name(dtype) + " tensors (fp32, fp16 or bf16)"};
  const uint64_t elem = dtype == DType::kFp32 ? 4 : 2;

  std::map<std::string, const Tensor*> sorted;  // the data goes in name order, as the header lists it
  for (const NamedTensor& t : tensors) {
    if (!sorted.emplace(t.name, t.tensor).second) return Error{path + ": tensor '" + t.name + "' given twice"};
    if (t.tensor->numel() != static_cast<int64_t>(t.tensor->data.size()))
      return Error{path + ": tensor '" + t.name + "': shape " + shape_string(t.tensor->shape) +
                   " does not match its " + std::to_string(t.tensor->data.size()) + " values"};
  }
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : sorted) {
    const uint64_t end = offset + t->data.size() * elem;
    header[name] = {{"dtype", tag}, {"shape", t->shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error{path + ": cannot create the file"};
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<unsigned char> buf;
  for (const auto& [name, t] : sorted) {
    buf.resize(t->data.size() * elem);
    for (size_t i = 0; i < t->data.size(); ++i) {
      unsigned char* p = buf.data() + i * elem;
      if (elem == 4) {
        const auto u = std::bit_cast<uint32_t>(t->data[i]);
        for (int b = 0; b < 4; ++b) p[b] = static_cast<unsigned char>(u >> (8 * b));
      } else {
        const uint16_t u = dtype == DType::kFp16 ? fp32_to_fp16(t->data[i]) : fp32_to_bf16(t->data[i]);
        p[0] = static_cast<unsigned char>(u);
        p[1] = static_cast<unsigned char>(u >> 8);
      }
    }
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  }
  out.close();
  if (!out) return Error{path + ": writing failed (disk full?)"};
  return Ok{};
}

}  // namespace servesim
