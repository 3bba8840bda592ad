// IR -> oracle callbacks. Evaluators are not thread-safe, so each thread keeps its own set in
// thread-local storage, rebuilt when it meets a different VariantFns (identified by a generation
// number, never by address: a new object may reuse a freed one's address).
#include <atomic>
#include <cmath>

#include "flexattn/cpu_variant.h"
#include "flexattn/error.h"
#include "flexattn/ir_passes.h"

namespace flexattn::cpu {

namespace {
std::atomic<uint64_t> g_generation{1};

struct LoadGradEval {
  std::unique_ptr<ir::Evaluator> load;        // evaluates the load node (its index operands)
  std::unique_ptr<ir::Evaluator> derivative;  // d score_mod / d load
  std::vector<int> index_nodes;               // positions of the index operands in load->values()
};

struct ThreadState {
  uint64_t generation = 0;
  std::unique_ptr<ir::Evaluator> score, mask, d_score;
  std::vector<LoadGradEval> loads;
};
thread_local ThreadState tls;
}  // namespace

struct VariantFns::Impl {
  uint64_t generation = g_generation.fetch_add(1);
  ir::Expr score_mod, mask_mod, d_score;
  std::vector<ir::LoadGrad> load_grads;
  std::vector<int> load_grad_buffer;  // index into grad_names
  std::vector<std::string> grad_names;
  std::map<std::string, ir::BufferView> buffers;
  std::map<std::string, double> scalars;
  int threads = 1;
  std::vector<std::vector<std::vector<double>>> accum;  // [grad buffer][thread][element]
  ModFns fns;

  ir::EvalEnv env() const {
    ir::EvalEnv e;
    e.scalar = [this](const std::string& name) {
      auto it = scalars.find(name);
      if (it == scalars.end()) throw Error("scalar '" + name + "' is used by the mod but no value was given");
      return it->second;
    };
    e.buffer = [this](const std::string& name) -> const ir::BufferView* {
      auto it = buffers.find(name);
      return it == buffers.end() ? nullptr : &it->second;
    };
    return e;
  }

  ThreadState& state() {
    if (tls.generation != generation) {
      ThreadState s;
      s.generation = generation;
      const ir::EvalEnv e = env();
      auto make = [&](const ir::Expr& x) {
        if (x.empty()) return std::unique_ptr<ir::Evaluator>();
        auto ev = std::make_unique<ir::Evaluator>(x);
        ev->bind(e);
        return ev;
      };
      s.score = make(score_mod);
      s.mask = make(mask_mod);
      s.d_score = make(d_score);
      for (const ir::LoadGrad& lg : load_grads) {
        LoadGradEval l;
        l.load = make(lg.load);
        l.derivative = make(lg.derivative);
        for (const ir::NodePtr& a : lg.load->args) l.index_nodes.push_back(l.load->index_of(a.get()));
        s.loads.push_back(std::move(l));
      }
      tls = std::move(s);
    }
    return tls;
  }
};

VariantFns::VariantFns(const Variant& variant, const ModBindings& bindings, int threads)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.threads = resolve_threads(threads);
  m.buffers = bindings.buffers;
  m.scalars = bindings.scalars;
  if (!variant.score_mod.empty()) {
    ir::verify_score_mod(variant.score_mod);
    m.score_mod = variant.score_mod;
  }
  if (!variant.mask_mod.empty()) {
    ir::verify_mask_mod(variant.mask_mod);
    m.mask_mod = variant.mask_mod;
  }
  for (const std::string& g : variant.grad_buffers) {
    auto it = m.buffers.find(g);
    if (it == m.buffers.end()) throw Error("grad buffer '" + g + "' was not given");
    if (!is_float(it->second.dtype)) throw Error("grad buffer '" + g + "' must hold floats to have a gradient");
    m.grad_names.push_back(g);
  }
  if (!m.score_mod.empty()) {
    ir::ScoreModGrad grad = ir::differentiate(m.score_mod, variant.grad_buffers);
    m.d_score = grad.d_score;
    for (const ir::LoadGrad& lg : grad.loads) {
      for (size_t i = 0; i < m.grad_names.size(); ++i)
        if (m.grad_names[i] == lg.load->name) {
          m.load_grads.push_back(lg);
          m.load_grad_buffer.push_back(int(i));
        }
    }
  }
  // Bind once on this thread so missing scalars/buffers are reported here, not inside a worker.
  m.state();
  reset_buffer_grads();

  Impl* p = impl_.get();
  if (!m.score_mod.empty())
    m.fns.score_mod = [p](double s, int64_t b, int64_t h, int64_t q, int64_t kv) {
      return p->state().score->run(s, b, h, q, kv).as_double();
    };
  if (!m.mask_mod.empty())
    m.fns.mask_mod = [p](int64_t b, int64_t h, int64_t q, int64_t kv) {
      return p->state().mask->run(0.0, b, h, q, kv).as_bool();
    };
  if (!m.d_score.empty())
    m.fns.score_grad = [p](double s, int64_t b, int64_t h, int64_t q, int64_t kv, double g) {
      return g * p->state().d_score->run(s, b, h, q, kv).as_double();
    };
  m.fns.buffer_grad_threads = m.threads;
  if (!m.load_grads.empty())
    m.fns.buffer_grad = [p](int thread, double s, int64_t b, int64_t h, int64_t q, int64_t kv, double g) {
      ThreadState& st = p->state();
      for (size_t i = 0; i < st.loads.size(); ++i) {
        LoadGradEval& l = st.loads[i];
        const double d = l.derivative->run(s, b, h, q, kv).as_double();
        l.load->run(s, b, h, q, kv);
        const std::string& name = p->grad_names[p->load_grad_buffer[i]];
        const ir::BufferView& view = p->buffers.at(name);
        int64_t flat = 0;
        for (size_t dim = 0; dim < l.index_nodes.size(); ++dim)
          flat = flat * view.shape[dim] + ir::clamp_index(l.load->values()[l.index_nodes[dim]].i, view.shape[dim]);
        p->accum[p->load_grad_buffer[i]][thread][flat] += g * d;
      }
    };
}

VariantFns::~VariantFns() = default;

const ModFns& VariantFns::fns() const { return impl_->fns; }

void VariantFns::reset_buffer_grads() {
  Impl& m = *impl_;
  m.accum.assign(m.grad_names.size(), {});
  for (size_t i = 0; i < m.grad_names.size(); ++i) {
    const ir::BufferView& view = m.buffers.at(m.grad_names[i]);
    int64_t n = 1;
    for (int64_t s : view.shape) n *= s;
    m.accum[i].assign(m.threads, std::vector<double>(size_t(n), 0.0));
  }
}

std::map<std::string, HostTensor> VariantFns::buffer_grads() const {
  std::map<std::string, HostTensor> out;
  const Impl& m = *impl_;
  for (size_t i = 0; i < m.grad_names.size(); ++i) {
    HostTensor t(DType::F64, m.buffers.at(m.grad_names[i]).shape);
    for (int th = 0; th < m.threads; ++th)
      for (int64_t e = 0; e < t.numel(); ++e) t.set(e, t.get(e) + m.accum[i][th][e]);
    out.emplace(m.grad_names[i], std::move(t));
  }
  return out;
}

}  // namespace flexattn::cpu
