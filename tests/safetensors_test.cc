#include "kernels/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace servesim {
namespace {

// A fresh path named `name` in a folder of the running test.
std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("servesim_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
                    std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Writes a safetensors-shaped file: the length (`header.size()` unless given), header, data.
std::string raw_file(const std::string& header, const std::string& data, uint64_t length = UINT64_MAX) {
  if (length == UINT64_MAX) length = header.size();
  const std::string path = temp_path("raw.safetensors");
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(length >> (8 * i)));
  out << header << data;
  return path;
}

std::string open_error(const std::string& path) {
  auto f = SafetensorsFile::open(path);
  return f ? "(opened)" : f.error().message;
}

float bits(uint32_t u) { return std::bit_cast<float>(u); }

// ---- conversions -------------------------------------------------------------------------------

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.5f), 0xc100);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);      // below the midpoint to 65536
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);      // the midpoint rounds (to even) to infinity
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(0.1f), 0x2e66);
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);      // tie: stays on even 1.0
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie: up to even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above the tie
  // Subnormals: units of 2^-24.
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(1023 * 0x1p-24f), 0x03ff);
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);             // smallest normal
  EXPECT_EQ(fp32_to_fp16(1023.5f * 0x1p-24f), 0x0400);   // tie rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);             // tie between 0 and 2^-24: even
  EXPECT_EQ(fp32_to_fp16(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(3 * 0x1p-25f), 0x0002);         // tie between 1 and 2 units: even
  EXPECT_EQ(fp32_to_fp16(-5 * 0x1p-24f), 0x8005);
  EXPECT_EQ(fp32_to_fp16(0x1p-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(bits(0x00000001)), 0x0000);     // float32 subnormal
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(bits(0x7f800001)))));  // low payload: still NaN

  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc100), -2.5f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x8001), -0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_fp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
}

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const auto u = static_cast<uint16_t>(h);
    const float f = fp16_to_fp32(u);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
    } else {
      EXPECT_EQ(fp32_to_fp16(f), u) << h;
    }
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion (round to nearest even) as a reference.
TEST(Fp16, MatchesCompilerConversion) {
  uint64_t s = 12345;
  for (int i = 0; i < 1000000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    auto u = static_cast<uint32_t>(s >> 32);
    if (i % 2) u = (u & 0x80000000u) | (0x30000000u + u % 0x18000000u);  // concentrate on fp16's range
    const float f = bits(u);
    if (std::isnan(f)) continue;
    const auto ref = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(fp32_to_fp16(f), ref) << std::hexfloat << f;
  }
}
#endif

TEST(Bf16, KnownValues) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(-2.5f), 0xc020);
  EXPECT_EQ(fp32_to_bf16(65504.0f), 0x4780);        // 65504 rounds to 65536 in bf16
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);  // tie: stays on even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to infinity
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(fp32_to_bf16(bits(0x00080000)), 0x0008);  // subnormal, exact
  EXPECT_EQ(fp32_to_bf16(bits(0x00008000)), 0x0000);  // subnormal tie: even
  EXPECT_EQ(fp32_to_bf16(bits(0x00018000)), 0x0002);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(bits(0x7f800001)))));  // would truncate to inf
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));

  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xc020), -2.5f);
  EXPECT_EQ(bf16_to_fp32(0x0001), bits(0x00010000));
  EXPECT_EQ(bf16_to_fp32(0x7f80), std::numeric_limits<float>::infinity());
}

TEST(Bf16, EveryBf16RoundTripsAndRoundingIsStable) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto u = static_cast<uint16_t>(b);
    if (!std::isnan(bf16_to_fp32(u))) {
      EXPECT_EQ(fp32_to_bf16(bf16_to_fp32(u)), u) << b;
    }
  }
  uint64_t s = 99;
  for (int i = 0; i < 100000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const float f = bits(static_cast<uint32_t>(s >> 32));
    if (std::isnan(f)) continue;
    const float once = bf16_to_fp32(fp32_to_bf16(f));
    EXPECT_EQ(bf16_to_fp32(fp32_to_bf16(once)), once);
    if (!std::isinf(once)) {  // within half an ulp (8 significant bits; 2^-133 for subnormals)
      EXPECT_LE(std::abs(once - f), std::max(std::abs(f) * 0x1p-8f, 0x1p-134f)) << f;
    }
    const float half = fp16_to_fp32(fp32_to_fp16(f));
    EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(half)), half);
  }
}

// ---- files -------------------------------------------------------------------------------------

TEST(Safetensors, WriteThenReadEachDtype) {
  const Tensor a{{2, 3}, {1, -2.5f, 0.1f, 65504, 0x1p-24f, -0.0f}};
  const Tensor b{{4}, {3, 4, 5, 6}};
  for (DType d : {DType::kFp32, DType::kFp16, DType::kBf16}) {
    const std::string path = temp_path(std::string(dtype_name(d)) + ".safetensors");
    ASSERT_TRUE(write_safetensors(path, {{"b", &b}, {"a", &a}}, d, {{"format", "pt"}}).ok());
    auto f = SafetensorsFile::open(path);
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ(f.value().header().metadata.at("format"), "pt");
    const auto& ea = f.value().header().tensors.at("a");
    EXPECT_EQ(ea.dtype, d == DType::kFp32 ? "F32" : d == DType::kFp16 ? "F16" : "BF16");
    EXPECT_EQ(ea.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(ea.begin, 0u);  // name order: "a" first
    auto ra = f.value().read_f32("a");
    ASSERT_TRUE(ra.ok()) << ra.error().message;
    for (size_t i = 0; i < a.data.size(); ++i) {
      const float want = d == DType::kFp32   ? a.data[i]
                         : d == DType::kFp16 ? fp16_to_fp32(fp32_to_fp16(a.data[i]))
                                             : bf16_to_fp32(fp32_to_bf16(a.data[i]));
      EXPECT_EQ(std::bit_cast<uint32_t>(ra.value()[i]), std::bit_cast<uint32_t>(want)) << i;
    }
    EXPECT_EQ(f.value().read_f32("b").value(), b.data);
    // The header is padded to 8 bytes, so the data starts aligned.
    std::ifstream in(path, std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    EXPECT_EQ(n % 8, 0u);
  }
}

TEST(Safetensors, WriteErrors) {
  const Tensor a{{2, 3}, {1, 2, 3}};
  const std::string path = temp_path("w.safetensors");
  auto s = write_safetensors(path, {{"a", &a}}, DType::kFp32);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, path + ": tensor 'a': shape [2, 3] does not match its 3 values");
  const Tensor b{{1}, {1}};
  s = write_safetensors(path, {{"b", &b}}, DType::kInt4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, path + ": cannot write int4 tensors (fp32, fp16 or bf16)");
  s = write_safetensors(path, {{"b", &b}, {"b", &b}}, DType::kFp32);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, path + ": tensor 'b' given twice");
  s = write_safetensors("/nonexistent-dir/x.safetensors", {{"b", &b}}, DType::kFp32);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "/nonexistent-dir/x.safetensors: cannot create the file");
}

TEST(Safetensors, FileErrors) {
  EXPECT_EQ(open_error("/nonexistent.safetensors"), "/nonexistent.safetensors: cannot open file (no such file)");

  std::string p = temp_path("short.safetensors");
  std::ofstream(p, std::ios::binary) << "abc";
  EXPECT_EQ(open_error(p), p + ": too short for a safetensors file (3 bytes)");

  p = raw_file("{}", "", 1000);
  EXPECT_EQ(open_error(p),
            p + ": header length 1000 does not fit the file's 10 bytes (not a safetensors file, or truncated)");
  p = raw_file("{}", "", UINT64_MAX - 1);  // must not overflow
  EXPECT_NE(open_error(p).find("does not fit"), std::string::npos);
  p = raw_file("", "", 0);
  EXPECT_NE(open_error(p).find("header length 0 does not fit"), std::string::npos);

  p = raw_file("{\"a\": ", "");
  EXPECT_EQ(open_error(p), p + ": the header is not valid JSON (parse error at line 1, column 7: "
                             "syntax error while parsing value - unexpected end of input; "
                             "expected '[', '{', or a literal)");
  p = raw_file("{\"a\": " + std::string(200, '[') + std::string(200, ']') + "}", "");
  EXPECT_NE(open_error(p).find("nested more than 100 levels"), std::string::npos) << open_error(p);
  EXPECT_NE(open_error("/dev/zero").find("it is not a regular file"), std::string::npos);
  p = raw_file("[1, 2]", "");
  EXPECT_EQ(open_error(p), p + ": the header is not a JSON object");
  p = raw_file(R"({"__metadata__": 3})", "");
  EXPECT_EQ(open_error(p), p + ": '__metadata__' is not an object");
  p = raw_file(R"({"a": 3})", "");
  EXPECT_EQ(open_error(p), p + ": tensor 'a': entry is not an object");
  p = raw_file(R"({"a": {"shape": [1], "data_offsets": [0, 4]}})", "abcd");
  EXPECT_EQ(open_error(p), p + ": tensor 'a': 'dtype' is missing or not a string");
  p = raw_file(R"({"a": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]}})", "abcd");
  EXPECT_EQ(open_error(p), p + ": tensor 'a': 'shape' is missing or not an array");
  p = raw_file(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", "abcd");
  EXPECT_EQ(open_error(p), p + ": tensor 'a': 'shape' holds something other than a non-negative integer");
  p = raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", "abcd");
  EXPECT_EQ(open_error(p), p + ": tensor 'a': 'data_offsets' is not a pair of non-negative integers");
  p = raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", "abcd");
  EXPECT_EQ(open_error(p), p + ": tensor 'a': data_offsets [4, 0] lie outside the 4 bytes of data (truncated file?)");
  p = raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", "abcd");
  EXPECT_EQ(open_error(p), p + ": tensor 'a': data_offsets [0, 8] lie outside the 4 bytes of data (truncated file?)");
}

TEST(Safetensors, ReadErrors) {
  const std::string p = raw_file(
      R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]},)"
      R"( "i": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]},)"
      R"( "h": {"dtype": "F16", "shape": [4294967296, 4294967296, 2], "data_offsets": [0, 8]},)"
      R"( "ok": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}})",
      std::string("\x00\x3c\x00\xc1\x00\x00\x00\x80", 8));
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto r = f.value().read_f32("a");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, p + ": tensor 'a': shape [2, 2] of F32 does not match its 8 bytes");
  r = f.value().read_f32("i");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, p + ": tensor 'i': dtype 'I64' is not supported (F32, F16 or BF16)");
  r = f.value().read_f32("h");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not match its 8 bytes"), std::string::npos);
  r = f.value().read_f32("nope");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, p + ": tensor 'nope': not in the file");
  r = f.value().read_f32("ok");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value(), (std::vector<float>{1.0f, -2.5f, 0.0f, -0.0f}));
}

}  // namespace
}  // namespace servesim
