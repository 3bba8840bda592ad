#pragma once
// Evaluating library mods with the interpreter at sample points.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "flexattn/error.h"
#include "flexattn/expr.h"
#include "flexattn/tensor.h"

namespace flexattn::test {

struct ModEnv {
  std::map<std::string, double> scalars;
  std::map<std::string, ir::BufferView> buffers;

  void add(const std::string& name, const HostTensor& t) { buffers[name] = ir::BufferView{t.dtype, t.shape, t.data()}; }

  ir::Value eval(const ir::Expr& e, double score, int64_t b, int64_t h, int64_t q, int64_t kv) const {
    ir::EvalEnv env;
    env.score = score, env.b = b, env.h = h, env.q_idx = q, env.kv_idx = kv;
    env.scalar = [this](const std::string& n) { return scalars.at(n); };
    env.buffer = [this](const std::string& n) -> const ir::BufferView* {
      auto it = buffers.find(n);
      return it == buffers.end() ? nullptr : &it->second;
    };
    return ir::eval(e, env);
  }
  bool mask(const ir::Expr& e, int64_t q, int64_t kv, int64_t b = 0, int64_t h = 0) const {
    ir::Value v = eval(e, 0.0, b, h, q, kv);
    EXPECT_EQ(v.type, DType::Bool);
    return v.as_bool();
  }
  double score(const ir::Expr& e, double s, int64_t h, int64_t q, int64_t kv) const {
    ir::Value v = eval(e, s, 0, h, q, kv);
    EXPECT_EQ(v.type, DType::F32);
    return v.as_double();
  }
};

// Runs f and returns the flexattn::Error message ("" if nothing was thrown).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace flexattn::test
