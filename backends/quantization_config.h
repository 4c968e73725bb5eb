// Reading a config.json's quantization_config into the weight format of its quantized layers.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "backends/model.h"
#include "sim/result.h"

namespace servesim {

// The quantization_config at the root of `root` (a config.json): the format of the checkpoint's
// quantized layers, or method "" when there is none. Methods: fp8 (per-tensor or block-wise),
// fbgemm_fp8, mxfp4, modelopt (FP8, NVFP4), compressed-tensors (fp8, int8, int4, nvfp4 groups),
// awq, gptq (and their _marlin spellings), bitsandbytes refused. Errors name `path` and the key;
// an unknown quant_method lists the supported ones.
Result<WeightFormat> read_quantization_config(const nlohmann::json& root, const std::string& path);

}  // namespace servesim
