// The NCCL ring (docs/cp.md §3) on N GPUs of one host: one process per GPU, launched by
// scripts/multigpu_test.sh. Every rank builds the same inputs from fixed seeds, runs ring_forward /
// ring_backward on its shard and compares its rows of out, lse, dq and its shard of dk, dv with one-GPU
// cuda_forward / cuda_backward of the whole sequence on its own GPU. --time: the scaling table instead.
//   multigpu_cp_check --rank R --world N --id-file PATH [--device D] [--timeout S] [--time]
// (or RANK / WORLD_SIZE / FLEXATTN_NCCL_ID_FILE). Exit 0 all passed, 1 a failure, 2 usage, 77 no GPU or no
// NCCL (ctest: skipped), 124 timeout.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cp/nccl_api.h"
#include "cp/ring.h"
#include "flexattn/attention.h"
#include "flexattn/cp_nccl.h"
#include "flexattn/cuda_host.h"
#include "flexattn/mods.h"
#include "gpu/check_util.h"
#include "jit/device.h"

using namespace flexattn;

namespace {

struct Opts {
  int rank = -1, world = -1, device = -1, timeout_s = 280;
  std::string id_file;
  bool time = false;
};
Opts g;

[[noreturn]] void die(int code, const std::string& msg) {
  std::printf("%s\n", msg.c_str());
  std::fflush(stdout);
  std::_Exit(code);  // peers may be blocked in NCCL: no destructors, no communicator teardown
}

// A rank whose peer died waits in NCCL forever; the watchdog turns that into a clear exit.
void start_watchdog() {
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(g.timeout_s));
    die(124, "FAIL rank " + std::to_string(g.rank) + ": timeout after " + std::to_string(g.timeout_s) +
                 " s (a peer probably failed or never started; see the other ranks' logs)");
  }).detach();
}

// Rank 0 publishes the id by rename, so a reader never sees a partial file.
cp::NcclUniqueId exchange_id() {
  cp::NcclUniqueId id{};
  if (g.rank == 0) {
    id = cp::nccl_unique_id();
    const std::string tmp = g.id_file + ".tmp." + std::to_string(getpid());
    std::ofstream(tmp, std::ios::binary).write(id.bytes, sizeof(id.bytes));
    if (std::rename(tmp.c_str(), g.id_file.c_str()) != 0)
      die(1, "FAIL rank 0: cannot write the NCCL id file " + g.id_file + ": " + std::strerror(errno));
    return id;
  }
  const int wait_s = std::min(120, g.timeout_s);
  for (int i = 0; i < wait_s * 10; ++i) {
    std::ifstream f(g.id_file, std::ios::binary);
    if (f.read(id.bytes, sizeof(id.bytes)) && f.gcount() == sizeof(id.bytes)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  die(1, "FAIL rank " + std::to_string(g.rank) + ": no NCCL id in " + g.id_file + " after " + std::to_string(wait_s) +
             " s (rank 0 writes it once it has started and loaded libnccl; see rank 0's log)");
}

struct Case {
  std::string mask;  // a registry mask spec
  cp::Layout layout;
  DType dtype;
  int64_t B, Hq, Hkv, L, D;
  bool dlse = false;
};

std::string case_name(const Case& c) {
  char s[160];
  std::snprintf(s, sizeof(s), "%-18s %-10s %-4s B%lld H%lld/%lld L%lld D%lld%s", c.mask.c_str(),
                cp::layout_name(c.layout), std::string(dtype_name(c.dtype)).c_str(), (long long)c.B, (long long)c.Hq, (long long)c.Hkv,
                (long long)c.L, (long long)c.D, c.dlse ? " dlse" : "");
  return s;
}

// The variant with its host buffers (document ids), as the registry instantiates it.
struct Mod {
  Variant variant;
  ModBindings bindings;
  std::vector<std::unique_ptr<HostTensor>> storage;
  const HostTensor* doc_ids = nullptr;
  int64_t window = -1;
};

std::unique_ptr<Mod> make_mod(const Case& c) {
  auto m = std::make_unique<Mod>();
  const mods::ModSpec spec = mods::lookup_mask(c.mask);
  m->variant.mask_mod = spec.expr;
  const mods::ProblemShape ps{c.B, c.Hq, c.Hkv, c.L, c.L, c.D, c.D, 7};
  for (const auto& b : spec.buffers) {
    m->storage.push_back(std::make_unique<HostTensor>(b.make(ps)));
    m->bindings.buffers[b.name] = ir::BufferView{m->storage.back()->dtype, m->storage.back()->shape,
                                                 m->storage.back()->data()};
    if (b.name == "doc_ids") m->doc_ids = m->storage.back().get();
  }
  for (const auto& s : spec.scalars) m->bindings.scalars[s.name] = s.value(ps);
  if (c.mask.rfind("sliding_window:", 0) == 0) m->window = std::stoll(c.mask.substr(15));
  return m;
}

// The same masks written out for the host block-mask build: a row function is fast enough at S = 65536,
// where evaluating the IR per element is not.
BlockMask block_mask(const Case& c, const Mod& m) {
  const bool doc = m.doc_ids != nullptr;
  check(doc || m.window >= 0 || c.mask == "causal", "multigpu_cp_check: no host mask for " + c.mask);
  std::vector<int64_t> ids(doc ? size_t(c.L) : 0);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(m.doc_ids->get(int64_t(i)));
  const MaskRowFn row = [&](int64_t, int64_t, int64_t q, int64_t k0, int64_t k1, uint8_t* out) {
    for (int64_t k = k0; k < k1; ++k)
      out[k - k0] = doc ? ids[size_t(q)] == ids[size_t(k)] : (q >= k && (m.window < 0 || q - k <= m.window));
  };
  return build_block_mask(row, 1, 1, c.L, c.L, 128, 128);
}

// Device memory of one case, freed at its end.
struct Dev {
  std::vector<std::unique_ptr<jit::DeviceBuffer>> bufs;
  void* put(const void* host, size_t bytes) {
    bufs.push_back(std::make_unique<jit::DeviceBuffer>(std::max<size_t>(bytes, 256)));
    if (host && bytes) bufs.back()->upload(host, bytes);
    return reinterpret_cast<void*>(bufs.back()->ptr());
  }
  // NaN bytes: an element the ring forgets to write cannot pass a comparison.
  void* poisoned(size_t bytes) { return put(std::vector<uint8_t>(std::max<size_t>(bytes, 1), 0xff).data(), bytes); }
  const int32_t* ints(const std::vector<int32_t>& v) {
    return v.empty() ? nullptr : static_cast<const int32_t*>(put(v.data(), v.size() * 4));
  }
  TensorView tensor(const HostTensor& t) { return {put(t.data(), t.bytes.size()), t.dtype, t.shape, {}}; }
  TensorView empty(DType dt, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return {poisoned(size_t(n) * dtype_size(dt)), dt, std::move(shape), {}};
  }
};

DeviceBlockMask upload_mask(Dev& d, const BlockMask& m) {
  DeviceBlockMask r;
  r.kv_num_blocks = d.ints(m.kv_num_blocks), r.kv_indices = d.ints(m.kv_indices);
  r.q_num_blocks = d.ints(m.q_num_blocks), r.q_indices = d.ints(m.q_indices);  // the backward reads these
  if (m.has_full) {
    r.full_kv_num_blocks = d.ints(m.full_kv_num_blocks), r.full_kv_indices = d.ints(m.full_kv_indices);
    r.full_q_num_blocks = d.ints(m.full_q_num_blocks), r.full_q_indices = d.ints(m.full_q_indices);
  }
  r.B = m.B, r.H = m.H, r.nq = m.nq, r.nkv = m.nkv, r.q_len = m.q_len, r.kv_len = m.kv_len;
  r.q_block = m.q_block, r.kv_block = m.kv_block;
  return r;
}

HostTensor download(const TensorView& t) {
  HostTensor h(t.dtype, t.shape);
  jit::cu_check(jit::driver().cuMemcpyDtoH(h.data(), jit::CUdeviceptr(t.data), h.bytes.size()), "copy to host");
  return h;
}

// Everything ring_forward / ring_backward need for this rank: views, piece masks, workspaces.
struct RankRun {
  Dev dev;
  jit::Stream stream;
  std::vector<DeviceBlockMask> piece_masks;
  cp::RingBackwardArgs b;
  void setup(const Case& c, const Mod& m, const BlockMask& bm, const cp::ShardPlan& plan, cp::Communicator& comm,
             const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& dout,
             const HostTensor* dlse) {
    cp::RingForwardArgs& f = b.fwd;
    f.local.variant = &m.variant;
    f.local.bindings.scalars = m.bindings.scalars;
    for (const auto& [name, bv] : m.bindings.buffers) {  // whole-sequence buffers: the mods see global positions
      int64_t n = 1;
      for (int64_t s : bv.shape) n *= s;
      ir::BufferView d = bv;
      d.data = dev.put(bv.data, size_t(n) * dtype_size(bv.dtype));
      f.local.bindings.buffers[name] = d;
    }
    f.local.q = dev.tensor(q), f.local.k = dev.tensor(k), f.local.v = dev.tensor(v);
    const int64_t L = q.shape[2], S = k.shape[2];
    f.local.out = dev.empty(c.dtype, {c.B, c.Hq, L, c.D});
    f.local.lse = static_cast<float*>(dev.poisoned(size_t(c.B * c.Hq * L) * 4));
    f.local.device = comm.device();
    f.local.stream = stream.get();
    f.plan = &plan, f.rank = comm.rank(), f.comm = &comm;
    const int n = int(plan.chunks.size());
    piece_masks.assign(size_t(n * n), DeviceBlockMask{});
    for (const cp::RingStep& st : plan.ranks[size_t(f.rank)].steps)
      for (const cp::Piece& p : st.pieces) {
        const cp::Chunk &qc = plan.chunks[size_t(p.q_chunk)], &kc = plan.chunks[size_t(p.kv_chunk)];
        piece_masks[size_t(p.q_chunk * n + p.kv_chunk)] = upload_mask(
            dev, cp::slice_blocks(bm, qc.q_blocks.begin, qc.q_blocks.end, kc.kv_blocks.begin, kc.kv_blocks.end));
      }
    f.piece_masks = piece_masks.data();
    f.workspace_bytes = cp::ring_forward_workspace_bytes(f);
    f.workspace = dev.put(nullptr, f.workspace_bytes);
    b.dout = dev.tensor(dout);
    b.dlse = dlse ? static_cast<const float*>(dev.put(dlse->data(), dlse->bytes.size())) : nullptr;
    b.dq = dev.empty(c.dtype, {c.B, c.Hq, L, c.D});
    b.dk = dev.empty(c.dtype, {c.B, c.Hkv, S, c.D});
    b.dv = dev.empty(c.dtype, {c.B, c.Hkv, S, c.D});
    b.workspace_bytes = cp::ring_backward_workspace_bytes(b);
    b.workspace = dev.put(nullptr, b.workspace_bytes);
  }
};

HostTensor random_tensor(std::vector<int64_t> shape, DType dt, uint64_t seed) {
  HostTensor t(dt, std::move(shape));
  mods::fill_normal(&t, seed);
  return t;
}

int g_cases = 0, g_failed = 0;

void run_case(const Case& c, cp::Communicator& comm, uint64_t seed) {
  ++g_cases;
  const std::string name = case_name(c);
  const std::unique_ptr<Mod> m = make_mod(c);
  const BlockMask bm = block_mask(c, *m);
  const HostTensor q = random_tensor({c.B, c.Hq, c.L, c.D}, c.dtype, seed * 8 + 1),
                   k = random_tensor({c.B, c.Hkv, c.L, c.D}, c.dtype, seed * 8 + 2),
                   v = random_tensor({c.B, c.Hkv, c.L, c.D}, c.dtype, seed * 8 + 3),
                   dout = random_tensor({c.B, c.Hq, c.L, c.D}, c.dtype, seed * 8 + 4),
                   dlse = random_tensor({c.B, c.Hq, c.L}, DType::F32, seed * 8 + 5);
  CudaHostRequest req;
  req.variant = &m->variant, req.bindings = &m->bindings;
  req.q = &q, req.k = &k, req.v = &v, req.dout = &dout, req.dlse = c.dlse ? &dlse : nullptr;
  req.dtype = c.dtype, req.block_mask = &bm, req.device = comm.device();
  const CudaHostResult want = cuda_run_host(req);

  const cp::ShardPlan plan = cp::plan_shards(bm, comm.world_size(), c.layout);
  const int r = comm.rank();
  const HostTensor dlse_r = cp::gather_rank(plan, r, dlse, false);
  RankRun run;
  run.setup(c, *m, bm, plan, comm, cp::gather_rank(plan, r, q, false), cp::gather_rank(plan, r, k, true),
            cp::gather_rank(plan, r, v, true), cp::gather_rank(plan, r, dout, false), c.dlse ? &dlse_r : nullptr);
  cp::ring_forward(run.b.fwd);
  cp::ring_backward(run.b);
  run.stream.synchronize();

  const cp::RingForwardArgs& f = run.b.fwd;
  HostTensor lse(DType::F32, {c.B, c.Hq, f.local.q.shape[2]});
  jit::cu_check(jit::driver().cuMemcpyDtoH(lse.data(), jit::CUdeviceptr(f.local.lse), lse.bytes.size()), "copy lse");
  // Tolerances of gpu_attention_check (there against the CPU oracle; here both sides round to the dtype).
  const double p = c.dtype == DType::BF16 ? 1.0 / 256 : 1.0 / 2048;
  struct Cmp {
    const char* what;
    HostTensor got;
    const HostTensor* whole;  // the reference over the whole sequence
    bool kv, absolute;
    double limit;
  };
  const Cmp cmps[] = {
      {"out", download(f.local.out), &want.out, false, false, 4 * p},
      {"lse", lse, &want.lse, false, true, 1e-3},
      {"dq", download(run.b.dq), &want.dq, false, false, 16 * p},
      {"dk", download(run.b.dk), &want.dk, true, false, 16 * p},
      {"dv", download(run.b.dv), &want.dv, true, false, 16 * p},
  };
  bool ok = true;
  std::string errs;
  for (const Cmp& x : cmps) {
    // Scaled by the whole tensor's max: a rank's slice may hold only small values (early causal rows).
    const double e = gpu_check::rel_err(x.got, cp::gather_rank(plan, r, *x.whole, x.kv),
                                        x.absolute ? 1.0 : gpu_check::max_abs(*x.whole));
    const bool pass = e <= x.limit;
    ok = ok && pass;
    char s[64];
    std::snprintf(s, sizeof(s), " %s %.1e%s", x.what, e, pass ? "" : "!");
    errs += s;
  }
  g_failed += ok ? 0 : 1;
  std::printf("%s rank %d/%d %s steps %d%s\n", ok ? "PASS" : "FAIL", r, comm.world_size(), name.c_str(),
              plan.ring_steps, errs.c_str());
  std::fflush(stdout);
}

std::vector<Case> check_cases(int n) {
  using L = cp::Layout;
  const int64_t even = 512 * n, odd = 512 * n - 77;  // odd: a tail block, and not divisible by n
  return {
      {"causal", L::zigzag, DType::BF16, 1, 4, 4, even, 128},
      {"causal", L::contiguous, DType::F16, 1, 4, 4, odd, 64},
      {"causal", L::zigzag, DType::F16, 1, 4, 4, odd, 64},
      {"sliding_window:300", L::contiguous, DType::BF16, 1, 4, 4, odd, 128},
      {"sliding_window:300", L::zigzag, DType::BF16, 1, 4, 4, odd, 64},
      {"document:3", L::contiguous, DType::BF16, 1, 4, 4, odd, 64},
      {"document:3", L::zigzag, DType::F16, 1, 4, 4, even, 128},
      {"causal", L::zigzag, DType::BF16, 2, 8, 2, odd, 128, true},  // GQA, batch 2, a dlse
  };
}

// Fast filler: at S = 65536 the timed inputs are GBs and their values do not matter.
HostTensor noise(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  HostTensor t(dt, std::move(shape));
  uint16_t* x = reinterpret_cast<uint16_t*>(t.bytes.data());
  const uint16_t bits = dt == DType::BF16 ? 0x3c00 : 0x2c00;  // small magnitudes of both signs: no overflow
  for (int64_t i = 0; i < t.numel(); ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = uint16_t(bits | ((seed >> 33) & 0x83ff));
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run_timing(cp::Communicator& comm) {
  const int n = comm.world_size(), r = comm.rank();
  if (r == 0)
    std::printf("%-18s %-10s %6s %2s %5s %10s %10s %10s %9s\n", "mask", "layout", "S", "N", "steps", "fwd ms",
                "bwd ms", "fwd+bwd ms", "imbalance");
  for (int64_t S : {16384, 65536})
    for (const auto& [mask, layout] : {std::pair{"causal", cp::Layout::zigzag},
                                       std::pair{"sliding_window:2048", cp::Layout::contiguous},
                                       std::pair{"document:8", cp::Layout::contiguous}}) {
      const Case c{mask, layout, DType::BF16, 1, 16, 16, S, 128};
      const std::unique_ptr<Mod> m = make_mod(c);
      const BlockMask bm = block_mask(c, *m);
      const cp::ShardPlan plan = cp::plan_shards(bm, n, layout);
      const int64_t rows = cp::local_size(plan, r, false), cols = cp::local_size(plan, r, true);
      RankRun run;
      run.setup(c, *m, bm, plan, comm, noise(c.dtype, {1, 16, rows, 128}, 1), noise(c.dtype, {1, 16, cols, 128}, 2),
                noise(c.dtype, {1, 16, cols, 128}, 3), noise(c.dtype, {1, 16, rows, 128}, 4), nullptr);
      std::vector<double> fwd, bwd, both;
      for (int it = 0; it < 12; ++it) {  // 2 warm-up runs (the first compiles), then 10 timed
        jit::Event e0, e1, e2;
        e0.record(run.stream.get());
        cp::ring_forward(run.b.fwd);
        e1.record(run.stream.get());
        cp::ring_backward(run.b);
        e2.record(run.stream.get());
        e2.synchronize();
        if (it < 2) continue;
        fwd.push_back(jit::Event::elapsed_ms(e0, e1));
        bwd.push_back(jit::Event::elapsed_ms(e1, e2));
        both.push_back(jit::Event::elapsed_ms(e0, e2));
      }
      // Each rank's own medians go to its log; rank 0's row is the table (steps synchronise the ranks).
      std::printf("%s %-18s %-10s %6lld %2d %5d %10.3f %10.3f %10.3f %9.3f\n", r == 0 ? "TIME" : "time",
                  mask, cp::layout_name(layout), (long long)S, n, plan.ring_steps, median(fwd), median(bwd),
                  median(both), plan.imbalance());
      std::fflush(stdout);
    }
}

int arg_int(const char* s, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!*s || *end) die(2, std::string("multigpu_cp_check: ") + what + " must be an integer; got '" + s + "'");
  return int(v);
}

void parse(int argc, char** argv) {
  if (const char* e = std::getenv("RANK")) g.rank = arg_int(e, "RANK");
  if (const char* e = std::getenv("WORLD_SIZE")) g.world = arg_int(e, "WORLD_SIZE");
  if (const char* e = std::getenv("FLEXATTN_NCCL_ID_FILE")) g.id_file = e;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) die(2, "multigpu_cp_check: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--rank") g.rank = arg_int(value(), "--rank");
    else if (a == "--world") g.world = arg_int(value(), "--world");
    else if (a == "--device") g.device = arg_int(value(), "--device");
    else if (a == "--timeout") g.timeout_s = arg_int(value(), "--timeout");
    else if (a == "--id-file") g.id_file = value();
    else if (a == "--time") g.time = true;
    else die(2, "multigpu_cp_check: unknown argument '" + a + "'\nusage: multigpu_cp_check --rank R --world N "
                "--id-file PATH [--device D] [--timeout S] [--time]   (or RANK, WORLD_SIZE, FLEXATTN_NCCL_ID_FILE)");
  }
  if (g.world < 1 || g.rank < 0 || g.rank >= g.world || g.id_file.empty() || g.timeout_s < 1)
    die(2, "multigpu_cp_check: need --world N >= 1, --rank R in [0, N), --id-file PATH and --timeout >= 1; got rank " +
               std::to_string(g.rank) + ", world " + std::to_string(g.world) + ", id file '" + g.id_file + "'");
  if (g.device < 0) g.device = g.rank;
}

}  // namespace

int main(int argc, char** argv) {
  parse(argc, argv);
  const std::string who = "rank " + std::to_string(g.rank) + "/" + std::to_string(g.world);
  std::string why;
  if (!cuda_available(&why)) die(77, "SKIP " + who + ": cuda backend unavailable: " + why);
  if (!cp::try_nccl_api(&why)) die(77, "SKIP " + who + ": " + why);
  start_watchdog();
  try {
    const int devices = jit::device_count();
    if (g.device >= devices)
      die(1, "FAIL " + who + ": device " + std::to_string(g.device) + " does not exist (" + std::to_string(devices) +
                 " visible); one GPU per rank, NCCL refuses two ranks on one GPU");
    jit::use_device(g.device);
    const cp::NcclUniqueId id = exchange_id();
    std::unique_ptr<cp::Communicator> comm = cp::nccl_init(id, g.rank, g.world, g.device);
    std::printf("%s on device %d (%s)\n", who.c_str(), g.device, jit::device_props(g.device).name.c_str());
    if (g.time) {
      run_timing(*comm);
    } else {
      uint64_t seed = 100;
      for (const Case& c : check_cases(g.world)) run_case(c, *comm, ++seed);
    }
    jit::device_synchronize();
  } catch (const std::exception& e) {
    // The peers are likely inside a ring step now; exiting lets their watchdogs report it.
    die(1, "FAIL " + who + ": error: " + e.what() + "\n" + std::to_string(g_cases) + " cases, " +
               std::to_string(g_failed + 1) + " failed");
  }
  if (!g.time) std::printf("%d cases, %d failed\n", g_cases, g_failed);
  std::fflush(stdout);
  std::_Exit(g_failed ? 1 : 0);  // skip the communicator teardown: a peer may still be in its last transfer
}
