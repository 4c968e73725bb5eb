// The safetensors file format (Hugging Face): an 8-byte little-endian header length N, N bytes of
// JSON {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"key": "value"}}, then the raw little-endian tensor data, offsets relative to
// its start. This file knows the format and the float conversions; kernels/weights.cc knows which
// tensors a model needs. A SafetensorsFile owns its open stream and reads one tensor at a time, so
// a large file is never held in memory whole.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "backends/model.h"
#include "kernels/weights.h"
#include "sim/result.h"

namespace servesim {

// IEEE binary16 and bfloat16 <-> float32. To-float is exact; from-float rounds to nearest even,
// overflows to infinity (fp16: |x| >= 65520), keeps fp16 subnormals, and keeps NaN a (quiet) NaN.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t b);
uint16_t fp32_to_bf16(float f);

// One entry of the header. `dtype` is the file's own string ("F32", "F16", "BF16", "I64", ...);
// offsets are bytes from the start of the data section, begin <= end <= data size.
struct SafetensorsEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__" (string values only)
};

// The largest header the safetensors format allows (100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Parses the JSON header text of a file whose data section holds `data_size` bytes. Checks the
// types of every field and that each tensor's offsets lie inside the data; errors start "`where`: ".
Result<SafetensorsHeader> parse_safetensors_header(const std::string& json_text, uint64_t data_size,
                                                   const std::string& where);

// "[64, 32]", as messages print shapes.
std::string shape_string(const std::vector<int64_t>& shape);

// An open safetensors file: the header is read and checked on open; tensors are read on demand.
class SafetensorsFile {
 public:
  // Errors: a missing or unreadable file, a file shorter than 8 bytes, a header length past the end
  // of the file, malformed JSON, bad fields, offsets outside the file. Messages start "PATH: ".
  static Result<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  bool contains(const std::string& name) const { return header_.tensors.count(name) > 0; }

  // Reads tensor `name` (F32, F16 or BF16) converted to float32, row-major. Errors: an unknown
  // name, another dtype, a byte size that does not match the shape, a failed read.
  Result<std::vector<float>> read_f32(const std::string& name);

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::ifstream in_;
  uint64_t data_start_ = 0;  // 8 + N
  SafetensorsHeader header_;
};

struct NamedTensor {
  std::string name;
  const Tensor* tensor;  // not owned; must outlive the call
};

// Writes the tensors (names unique) as F32, F16 or BF16 (dtype kFp32, kFp16 or kBf16; others are
// an error), with `metadata` as "__metadata__". Tensors are laid out in name order, the header
// padded with spaces to a multiple of 8 bytes, as the reference implementation does.
Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         DType dtype, const std::map<std::string, std::string>& metadata = {});

}  // namespace servesim
