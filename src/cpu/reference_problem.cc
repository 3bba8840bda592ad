#include "cpu/reference_problem.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <system_error>
#include <thread>

namespace flexattn::cpu {

int resolve_threads(int threads) {
  check(threads >= 0, "options.threads must be >= 0 (0 = hardware concurrency); got " + std::to_string(threads));
  if (threads > 0) return threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_input(const HostTensor& t, const char* name, const char* dims) {
  check(t.shape.size() == 4, std::string(name) + " must be a 4-D tensor " + dims + "; got rank " +
                                 std::to_string(t.shape.size()) + " " + shape_string(t.shape));
  check(is_float(t.dtype), std::string(name) + " must have a float dtype (f16, bf16, f32, f64); got " +
                               std::string(dtype_name(t.dtype)));
  for (int64_t d : t.shape) check(d >= 0, std::string(name) + " has a negative dimension: " + shape_string(t.shape));
  t.check_byte_size(name);
}

std::vector<double> to_double(const HostTensor& t) {
  std::vector<double> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[size_t(i)] = t.get(i);
  return out;
}

std::string block_name(int64_t b, int64_t h, int64_t qb) {
  return shape_string({b, h, qb});
}

// Marks the blocks listed by (num, indices) as `state`; rejects out-of-range counts and ids and
// blocks listed twice (a kernel would visit them twice).
void mark_blocks(const BlockMask& bm, const std::vector<int32_t>& num, const std::vector<int32_t>& idx,
                 const char* num_name, const char* idx_name, uint8_t state, std::vector<uint8_t>* table) {
  const int64_t rows = bm.B * bm.H * bm.nq;
  check(int64_t(num.size()) == rows, std::string("block_mask.") + num_name + " must have B*H*nq = " +
                                         std::to_string(rows) + " entries; got " + std::to_string(num.size()));
  check(int64_t(idx.size()) == rows * bm.nkv, std::string("block_mask.") + idx_name + " must have B*H*nq*nkv = " +
                                                  std::to_string(rows * bm.nkv) + " entries; got " +
                                                  std::to_string(idx.size()));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (bm.H * bm.nq), h = r / bm.nq % bm.H, qb = r % bm.nq;
    const int32_t n = num[size_t(r)];
    check(n >= 0 && n <= bm.nkv, std::string("block_mask.") + num_name + block_name(b, h, qb) + " must be in [0, " +
                                     std::to_string(bm.nkv) + "]; got " + std::to_string(n));
    for (int32_t c = 0; c < n; ++c) {
      const int32_t kb = idx[size_t(r * bm.nkv + c)];
      check(kb >= 0 && kb < bm.nkv, std::string("block_mask.") + idx_name + block_name(b, h, qb) + "[" +
                                        std::to_string(c) + "] must be a kv block in [0, " +
                                        std::to_string(bm.nkv) + "); got " + std::to_string(kb));
      uint8_t& cell = (*table)[size_t(r * bm.nkv + kb)];
      check(cell == kSkip, "block_mask lists kv block " + std::to_string(kb) + " of query block row " +
                               block_name(b, h, qb) +
                               (cell == state ? std::string(" twice in ") + idx_name
                                              : std::string(" in both kv_indices and full_kv_indices")) +
                               "; the partial and full sets must be disjoint and without repeats");
      cell = state;
    }
  }
}

void build_block_table(const BlockMask& bm, Problem* p) {
  check(bm.q_len == p->L && bm.kv_len == p->S,
        "block_mask was built for q_len=" + std::to_string(bm.q_len) + ", kv_len=" + std::to_string(bm.kv_len) +
            "; got q_len=" + std::to_string(p->L) + ", kv_len=" + std::to_string(p->S));
  check(bm.B == 1 || bm.B == p->B,
        "block_mask batch B=" + std::to_string(bm.B) + " must be 1 or the q batch " + std::to_string(p->B));
  check(bm.H == 1 || bm.H == p->Hq,
        "block_mask heads H=" + std::to_string(bm.H) + " must be 1 or the q heads " + std::to_string(p->Hq));
  check(bm.q_block > 0 && bm.kv_block > 0, "block_mask block size (q_block, kv_block) must be positive; got (" +
                                               std::to_string(bm.q_block) + ", " + std::to_string(bm.kv_block) + ")");
  const int64_t nq = (bm.q_len + bm.q_block - 1) / bm.q_block, nkv = (bm.kv_len + bm.kv_block - 1) / bm.kv_block;
  check(bm.nq == nq && bm.nkv == nkv, "block_mask (nq, nkv) must be ceil(q_len/q_block), ceil(kv_len/kv_block) = (" +
                                          std::to_string(nq) + ", " + std::to_string(nkv) + "); got (" +
                                          std::to_string(bm.nq) + ", " + std::to_string(bm.nkv) + ")");
  p->mB = std::max<int64_t>(bm.B, 1);
  p->mH = std::max<int64_t>(bm.H, 1);
  p->nq = std::max<int64_t>(nq, 1);
  p->nkv = std::max<int64_t>(nkv, 1);
  p->q_block = bm.q_block;
  p->kv_block = bm.kv_block;
  p->blocks.assign(size_t(p->mB * p->mH * p->nq * p->nkv), kSkip);
  if (bm.B == 0 || bm.H == 0 || nq == 0 || nkv == 0) return;  // empty problem: nothing to look up
  mark_blocks(bm, bm.kv_num_blocks, bm.kv_indices, "kv_num_blocks", "kv_indices", kPartial, &p->blocks);
  if (bm.has_full) {
    mark_blocks(bm, bm.full_kv_num_blocks, bm.full_kv_indices, "full_kv_num_blocks", "full_kv_indices", kFull,
                &p->blocks);
  } else {
    check(bm.full_kv_num_blocks.empty() && bm.full_kv_indices.empty(),
          "block_mask.has_full is false but full_kv_num_blocks/full_kv_indices are not empty");
  }
}

}  // namespace

Problem make_problem(const HostTensor& q, const HostTensor& k, const HostTensor& v, const Options& options) {
  check_input(q, "q", "[B, Hq, L, D]");
  check_input(k, "k", "[Bkv, Hkv, S, D]");
  check_input(v, "v", "[Bkv, Hkv, S, Dv]");
  Problem p;
  p.B = q.shape[0], p.Hq = q.shape[1], p.L = q.shape[2], p.D = q.shape[3];
  p.Bkv = k.shape[0], p.Hkv = k.shape[1], p.S = k.shape[2], p.Dv = v.shape[3];
  check(p.D >= 1, "q head dim D (q.shape[3]) must be >= 1; got " + std::to_string(p.D));
  check(k.shape[3] == p.D, "k head dim (k.shape[3]) must equal the q head dim D=" + std::to_string(p.D) + "; got " +
                               std::to_string(k.shape[3]));
  check(v.shape[0] == p.Bkv && v.shape[1] == p.Hkv && v.shape[2] == p.S,
        "v must match k in [Bkv, Hkv, S] = " + shape_string({p.Bkv, p.Hkv, p.S}) + "; got v shape " + shape_string(v.shape));
  check(p.Hkv >= 1 && p.Hq % p.Hkv == 0, "q heads Hq=" + std::to_string(p.Hq) +
                                             " must be a multiple of the k/v heads Hkv=" + std::to_string(p.Hkv) +
                                             " (GQA)");
  check(p.Bkv == p.B || p.Bkv == 1, "k/v batch Bkv=" + std::to_string(p.Bkv) + " must equal the q batch B=" +
                                        std::to_string(p.B) + " or be 1 (broadcast)");
  p.group = p.Hq / p.Hkv;
  check(std::isnan(options.scale) || std::isfinite(options.scale),
        "options.scale must be finite (NaN = 1/sqrt(D)); got " + std::to_string(options.scale));
  p.scale = std::isnan(options.scale) ? 1.0 / std::sqrt(double(p.D)) : options.scale;
  p.threads = resolve_threads(options.threads);
  if (options.block_mask) build_block_table(*options.block_mask, &p);
  p.q = to_double(q);
  p.k = to_double(k);
  p.v = to_double(v);
  return p;
}

void score_row(const Problem& p, const ModFns& m, int64_t b, int64_t h, int64_t i, RowScores* r) {
  r->s.resize(size_t(p.S));
  r->sm.resize(size_t(p.S));
  r->keep.resize(size_t(p.S));
  double mx = -kInf;
  bool nan = false;
  for (int64_t j = 0; j < p.S; ++j) {
    const bool keep = kept(p, m, b, h, i, j);
    r->keep[size_t(j)] = keep;
    if (!keep) {
      r->s[size_t(j)] = 0.0;
      r->sm[size_t(j)] = -kInf;
      continue;
    }
    const double s = raw_score(p, b, h, i, j);
    const double sm = modded(m, s, b, h, i, j);
    r->s[size_t(j)] = s;
    r->sm[size_t(j)] = sm;
    nan |= std::isnan(sm);
    mx = std::max(mx, sm);
  }
  r->sum = 1.0;
  if (nan) {
    r->max = r->lse = std::numeric_limits<double>::quiet_NaN();
  } else if (std::isinf(mx)) {  // all -inf (fully masked): -inf; any +inf: +inf, as torch.logsumexp
    r->max = r->lse = mx;
  } else {
    double sum = 0.0;
    for (int64_t j = 0; j < p.S; ++j)
      if (r->keep[size_t(j)]) sum += std::exp(r->sm[size_t(j)] - mx);
    r->max = mx;
    r->sum = sum;
    r->lse = mx + std::log(sum);
  }
}

void parallel_for(int64_t n, int threads, const std::function<void(int64_t task, int thread)>& fn) {
  const int t = int(std::min<int64_t>(std::max(threads, 1), std::max<int64_t>(n, 1)));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&](int thread) {
    for (int64_t task; !failed.load() && (task = next.fetch_add(1)) < n;) {
      try {
        fn(task, thread);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  if (t == 1) {
    worker(0);
  } else {
    // jthreads are joined on scope exit, whatever is thrown. A thread that cannot start (a capped address space or
    // process count: std::system_error) leaves its share to those that did, as tasks are taken dynamically; a
    // std::thread vector destroyed with joinable threads in it called std::terminate.
    std::vector<std::jthread> pool;
    pool.reserve(size_t(t - 1));
    try {
      for (int i = 1; i < t; ++i) pool.emplace_back(worker, i);
    } catch (const std::system_error&) {
    }
    worker(0);
  }
  if (error) std::rethrow_exception(error);
}

HostTensor make_f64(std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor t(DType::F64, std::move(shape));
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), values.size() * sizeof(double));
  return t;
}

}  // namespace detail
}  // namespace flexattn::cpu
