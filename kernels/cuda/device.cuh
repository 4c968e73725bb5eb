// Device discovery and owned device memory for the CUDA engine.
#pragma once

#include <cstddef>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/check.cuh"

namespace servesim::cuda {

// True when the CUDA runtime reports at least one device. Never aborts: with no driver or no
// device (cudaGetDeviceCount fails) it returns false and clears the sticky error.
bool cuda_device_available();

// Round-to-nearest-even conversions between float32 and bf16 on the host.
std::vector<__nv_bfloat16> to_bf16(const std::vector<float>& x);
std::vector<float> from_bf16(const std::vector<__nv_bfloat16>& x);

// An owned device array of n elements of T (uninitialised). Move-only; frees on destruction.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n > 0) SERVESIM_CUDA_CHECK(cudaMalloc(&ptr_, n * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), n_(o.n_) { o.ptr_ = nullptr; o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) { reset(); ptr_ = o.ptr_; n_ = o.n_; o.ptr_ = nullptr; o.n_ = 0; }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  // Grows to at least n elements (contents are lost when it reallocates).
  void reserve(size_t n) { if (n > n_) *this = DeviceBuffer(n); }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  void reset() { if (ptr_ != nullptr) cudaFree(ptr_); ptr_ = nullptr; n_ = 0; }
  T* ptr_ = nullptr;
  size_t n_ = 0;
};

// Copies host data into a new device buffer (synchronously).
template <typename T>
DeviceBuffer<T> to_device(const std::vector<T>& host) {
  DeviceBuffer<T> d(host.size());
  if (!host.empty())
    SERVESIM_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(T),
                                   cudaMemcpyHostToDevice));
  return d;
}

// Copies n elements of a device array to the host (synchronously).
template <typename T>
std::vector<T> to_host(const T* device, size_t n) {
  std::vector<T> h(n);
  if (n > 0)
    SERVESIM_CUDA_CHECK(cudaMemcpy(h.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

}  // namespace servesim::cuda
