// What every hardware-aware backend (roofline, cpu, cuda) reads from its setup: the hardware and
// model files (presets by name, or files, with the backend's defaults), the memory options, and
// for the real engines the weights.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "backends/backend.h"
#include "backends/hardware.h"
#include "backends/kv_memory.h"
#include "backends/model.h"
#include "kernels/weights.h"
#include "sim/result.h"

namespace servesim {

struct Specs {
  HardwareSpec hardware;
  ModelSpec model;
};

// The files one run's backends loaded, by what they asked for (files, tp, calibration sample).
struct SpecsCache {
  std::mutex mutex;
  std::map<std::string, Specs> loaded;
};

// Resolves and loads setup.hardware and setup.model, or the given presets when they are empty; once
// per run when setup.specs_cache is set.
Result<Specs> load_specs(const BackendSetup& setup, const char* default_hardware,
                         const char* default_model);

// Ok if the real engines (cpu, cuda) can execute the model: a dense Llama / Qwen2-family decoder
// with full attention in 16 or 32 bits. Else an error naming what they lack and pointing to the
// roofline backend, which prices every architecture servesim reads.
Status check_engine_model(const ModelSpec& model, const char* engine);

// The setup's memory options, with the given element types of weights and KV cache.
MemoryOptions memory_options(const BackendSetup& setup, DType weights, DType kv);

// The engine's weights: the setup's safetensors file, or random weights of its seed.
Result<ModelWeights> load_weights(const BackendSetup& setup, const ModelSpec& model);

}  // namespace servesim
