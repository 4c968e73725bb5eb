#include "kernels/cuda/check.cuh"

#include <cstdio>
#include <cstdlib>

namespace servesim::cuda {

void check_failed(const char* library, const char* statement, const char* error,
                  const char* file, int line) {
  std::fprintf(stderr, "%s:%d: %s error: %s in `%s`\n", file, line, library, error, statement);
  std::fflush(stderr);
  std::abort();
}

}  // namespace servesim::cuda
