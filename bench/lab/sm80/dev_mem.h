#pragma once
// Owned device buffers for the lab, and a block mask uploaded into AttnParams.
#include <memory>
#include <vector>

#include "lab.h"
#include "reference.h"

namespace lab {

struct DevMem {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevMem(size_t b) : bytes(b) {
    if (b) LAB_CHECK(cudaMalloc(&p, b));
  }
  ~DevMem() {
    if (p) cudaFree(p);
  }
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
  void poison() {  // 0xff bytes: NaN as bf16, fp16 and fp32
    if (bytes) LAB_CHECK(cudaMemset(p, 0xff, bytes));
  }
  void zero() {
    if (bytes) LAB_CHECK(cudaMemset(p, 0, bytes));
  }
  template <class T>
  void upload(const std::vector<T>& h) {
    if (!h.empty()) LAB_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <class T>
  std::vector<T> download(size_t n) const {
    std::vector<T> h(n);
    if (n) LAB_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

struct DeviceBlockMask {
  std::vector<std::unique_ptr<DevMem>> arrays;
  const int* put(const std::vector<int>& v) {
    arrays.push_back(std::make_unique<DevMem>(v.size() * 4));
    arrays.back()->upload(v);
    return arrays.back()->as<int>();
  }
  void upload(const HostBlockMask& m, AttnParams* p) {
    p->kv_num_blocks = put(m.kv_num);
    p->kv_indices = put(m.kv_idx);
    p->full_kv_num_blocks = put(m.full_kv_num);
    p->full_kv_indices = put(m.full_kv_idx);
    p->q_num_blocks = put(m.q_num);
    p->q_indices = put(m.q_idx);
    p->full_q_num_blocks = put(m.full_q_num);
    p->full_q_indices = put(m.full_q_idx);
    p->mask_B = m.mask_B, p->mask_H = m.mask_H, p->nq = m.nq, p->nkv = m.nkv;
    p->q_block = m.q_block, p->kv_block = m.kv_block;
  }
};

}  // namespace lab
