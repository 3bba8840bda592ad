// The "NAME[:ARG[:ARG]]" registry used by the CLI (--mask / --score) and the benchmark suite.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "flexattn/error.h"
#include "flexattn/mods.h"

namespace flexattn::mods {

using ir::Expr;

namespace {

struct Args {
  std::string spec;
  std::string name;
  std::vector<std::string> values;
};

Args split(const std::string& spec) {
  Args a;
  a.spec = spec;
  size_t start = 0;
  while (true) {
    size_t colon = spec.find(':', start);
    std::string part = spec.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (start == 0) a.name = part;
    else a.values.push_back(part);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return a;
}

void expect_count(const Args& a, size_t lo, size_t hi, const std::string& syntax) {
  if (a.values.size() >= lo && a.values.size() <= hi) return;
  throw Error("mod '" + a.spec + "': expected " + syntax + " (" +
              (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) +
              " argument" + (hi == 1 ? "" : "s") + "), got " + std::to_string(a.values.size()));
}

// Positions stay below 2^30 (the offset checks), so no mod argument needs more than i32; larger values failed deep in
// the IR builder without naming the argument.
int64_t int_arg(const Args& a, size_t i, const std::string& what, int64_t min,
                int64_t max = std::numeric_limits<int32_t>::max()) {
  const std::string& s = a.values[i];
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  check(!s.empty() && (ec == std::errc() || ec == std::errc::result_out_of_range) && end == s.data() + s.size(),
        "mod '" + a.spec + "': " + what + " must be an integer, got '" + s + "'");
  const bool negative = s[0] == '-';
  check(!(ec == std::errc() ? v < min : negative),
        "mod '" + a.spec + "': " + what + " must be >= " + std::to_string(min) + ", got " + s);
  check(ec == std::errc() && v <= max, "mod '" + a.spec + "': " + what + " must be <= " + std::to_string(max) + ", got " + s);
  return v;
}

double float_arg(const Args& a, size_t i, const std::string& what) {
  const std::string& s = a.values[i];
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  check(!s.empty() && ec == std::errc() && end == s.data() + s.size() && std::isfinite(v),
        "mod '" + a.spec + "': " + what + " must be a finite number, got '" + s + "'");
  check(v > 0, "mod '" + a.spec + "': " + what + " must be > 0, got " + s);
  // The kernels hold it as a float: outside the normal f32 range it is inf or 0 there (a cap of 0 gives NaN at
  // score 0) while the double-precision reference used it as given.
  check(v >= double(std::numeric_limits<float>::min()) && v <= double(std::numeric_limits<float>::max()),
        "mod '" + a.spec + "': " + what + " must lie in the normal float32 range [1.2e-38, 3.4e38], got " + s);
  return v;
}

// A seed per buffer so that buffers, q, k and v never share a random stream.
uint64_t buffer_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ uint8_t(c)) * 1099511628211ull;
  return seed * 0x9E3779B97F4A7C15ull ^ h;
}

BufferSpec random_buffer(const std::string& name, const std::string& shape_doc,
                         std::function<std::vector<int64_t>(const ProblemShape&)> shape) {
  BufferSpec b;
  b.name = name;
  b.dtype = DType::F32;
  b.shape_doc = shape_doc;
  b.trainable = true;
  b.make = [name, shape](const ProblemShape& p) {
    HostTensor t(DType::F32, shape(p));
    fill_normal(&t, buffer_seed(p.seed, name), 1.0);
    return t;
  };
  return b;
}

ScalarSpec heads_scalar() {
  return {"H", DType::I32, "number of query heads", [](const ProblemShape& p) { return double(p.H); }};
}

ModSpec make_spec(const Args& a, bool is_mask, Expr e) {
  ModSpec m;
  m.name = a.spec;
  m.is_mask = is_mask;
  m.expr = std::move(e);
  return m;
}

ModSpec build_document(const Args& a) {
  expect_count(a, 1, 2, "document:N[:i32|i64]");
  int64_t docs = int_arg(a, 0, "N (number of equal documents)", 1);
  DType dt = DType::I32;
  if (a.values.size() == 2) {
    check(a.values[1] == "i32" || a.values[1] == "i64",
          "mod '" + a.spec + "': the id type must be i32 or i64, got '" + a.values[1] + "'");
    dt = a.values[1] == "i32" ? DType::I32 : DType::I64;
  }
  ModSpec m = make_spec(a, true, document(ir::Buffer{"doc_ids", dt}));
  BufferSpec b;
  b.name = "doc_ids";
  b.dtype = dt;
  b.shape_doc = "[max(Q, KV)], N contiguous documents of (nearly) equal length";
  b.make = [docs, dt](const ProblemShape& p) {
    const int64_t len = std::max(p.Q, p.KV);
    HostTensor t(dt, {len});
    for (int64_t i = 0; i < len; ++i) t.set(i, double(i * docs / len));
    return t;
  };
  m.buffers.push_back(std::move(b));
  return m;
}

struct Builder {
  RegistryEntry entry;
  std::function<ModSpec(const Args&)> build;
};

const std::vector<Builder>& builders() {
  static const std::vector<Builder> table = {
      {{"full", "full", true, "attend everywhere (noop mask)"},
       [](const Args& a) { expect_count(a, 0, 0, "full"); return make_spec(a, true, full()); }},
      {{"causal", "causal", true, "q_idx >= kv_idx"},
       [](const Args& a) { expect_count(a, 0, 0, "causal"); return make_spec(a, true, causal()); }},
      {{"sliding_window", "sliding_window:W", true, "causal and q_idx - kv_idx <= W"},
       [](const Args& a) {
         expect_count(a, 1, 1, "sliding_window:W");
         return make_spec(a, true, sliding_window(int_arg(a, 0, "W (window)", 0)));
       }},
      {{"prefix_lm", "prefix_lm:P", true, "kv_idx < P or causal"},
       [](const Args& a) {
         expect_count(a, 1, 1, "prefix_lm:P");
         return make_spec(a, true, prefix_lm(int_arg(a, 0, "P (prefix length)", 0)));
       }},
      {{"document", "document:N[:i32|i64]", true,
        "doc_ids[q_idx] == doc_ids[kv_idx], N equal documents (buffer doc_ids created)"},
       build_document},
      {{"chunked", "chunked:C", true, "q_idx // C == kv_idx // C"},
       [](const Args& a) {
         expect_count(a, 1, 1, "chunked:C");
         return make_spec(a, true, chunked(int_arg(a, 0, "C (chunk size)", 1)));
       }},
      {{"dilated", "dilated:S", true, "causal and (q_idx - kv_idx) % S == 0"},
       [](const Args& a) {
         expect_count(a, 1, 1, "dilated:S");
         return make_spec(a, true, dilated(int_arg(a, 0, "S (stride)", 1)));
       }},
      {{"softcap", "softcap:C", false, "C * tanh(score / C)"},
       [](const Args& a) {
         expect_count(a, 1, 1, "softcap:C");
         return make_spec(a, false, softcap(float_arg(a, 0, "C (cap)")));
       }},
      {{"softcap_approx", "softcap_approx:C", false, "C * tanh_approx(score / C)"},
       [](const Args& a) {
         expect_count(a, 1, 1, "softcap_approx:C");
         return make_spec(a, false, softcap(float_arg(a, 0, "C (cap)"), true));
       }},
      {{"alibi", "alibi", false, "score + (kv_idx - q_idx) * 2^(-8 (h + 1) / H), scalar H = heads"},
       [](const Args& a) {
         expect_count(a, 0, 0, "alibi");
         ModSpec m = make_spec(a, false, alibi("H"));
         m.scalars.push_back(heads_scalar());
         return m;
       }},
      {{"alibi_slopes", "alibi_slopes", false,
        "score + (kv_idx - q_idx) * slopes[h], buffer slopes[H] = ALiBi slopes (trainable)"},
       [](const Args& a) {
         expect_count(a, 0, 0, "alibi_slopes");
         ModSpec m = make_spec(a, false, alibi(ir::Buffer{"slopes", DType::F32}));
         BufferSpec b;
         b.name = "slopes";
         b.shape_doc = "[H], 2^(-8 (h + 1) / H)";
         b.trainable = true;
         b.make = [](const ProblemShape& p) {
           HostTensor t(DType::F32, {p.H});
           for (int64_t h = 0; h < p.H; ++h) t.set(h, std::exp2(-8.0 * double(h + 1) / double(p.H)));
           return t;
         };
         m.buffers.push_back(std::move(b));
         return m;
       }},
      {{"relbias", "relbias[:const]", false,
        "score + bias[h, q_idx - kv_idx + S - 1], buffer bias[H, Q + KV - 1] ~ N(0,1) (trainable; with :const "
        "a constant, no gradient), scalar S = KV"},
       [](const Args& a) {
         expect_count(a, 0, 1, "relbias[:const]");
         if (!a.values.empty() && a.values[0] != "const")
           throw Error("mod '" + a.spec + "': the only option of relbias is 'const' (a bias without gradient), got '" +
                       a.values[0] + "'");
         ModSpec m = make_spec(a, false, relative_bias(ir::Buffer{"bias", DType::F32}, "S"));
         m.buffers.push_back(random_buffer("bias", "[H, Q + KV - 1]",
                                           [](const ProblemShape& p) { return std::vector<int64_t>{p.H, p.Q + p.KV - 1}; }));
         m.buffers.back().trainable = a.values.empty();
         m.scalars.push_back({"S", DType::I32, "KV length", [](const ProblemShape& p) { return double(p.KV); }});
         return m;
       }},
      {{"t5", "t5[:NUM_BUCKETS[:MAX_DISTANCE]]", false,
        "score + t5_bias[h, bucket(kv_idx - q_idx)], bidirectional T5 buckets (default 32:128), buffer "
        "t5_bias[H, NUM_BUCKETS] ~ N(0,1) (trainable)"},
       [](const Args& a) {
         expect_count(a, 0, 2, "t5[:NUM_BUCKETS[:MAX_DISTANCE]]");
         int64_t nb = a.values.size() > 0 ? int_arg(a, 0, "NUM_BUCKETS", 4, 1 << 16) : 32;
         int64_t md = a.values.size() > 1 ? int_arg(a, 1, "MAX_DISTANCE", 1) : 128;
         ModSpec m = make_spec(a, false, t5_bias(ir::Buffer{"t5_bias", DType::F32}, nb, md, true));
         m.buffers.push_back(random_buffer("t5_bias", "[H, NUM_BUCKETS]",
                                           [nb](const ProblemShape& p) { return std::vector<int64_t>{p.H, nb}; }));
         return m;
       }},
  };
  return table;
}

std::string known_list() {
  std::string s;
  for (const Builder& b : builders()) s += (s.empty() ? "" : ", ") + b.entry.syntax;
  return s;
}

}  // namespace

const std::vector<RegistryEntry>& registry() {
  static const std::vector<RegistryEntry> entries = [] {
    std::vector<RegistryEntry> e;
    for (const Builder& b : builders()) e.push_back(b.entry);
    return e;
  }();
  return entries;
}

ModSpec lookup(const std::string& spec) {
  Args a = split(spec);
  check(!a.name.empty(), "empty mod name in '" + spec + "'; known mods: " + known_list());
  for (const Builder& b : builders())
    if (b.entry.name == a.name) {
      try {
        return b.build(a);
      } catch (const Error& e) {
        // The mod builders' own checks (e.g. t5_bucket's) name their parameter but not the spec the user wrote.
        const std::string what = e.what();
        if (what.rfind("mod '", 0) == 0) throw;
        throw Error("mod '" + a.spec + "': " + what);
      }
    }
  throw Error("unknown mod '" + a.name + "'; known mods: " + known_list());
}

ModSpec lookup_mask(const std::string& spec) {
  ModSpec m = lookup(spec);
  check(m.is_mask, "'" + spec + "' is a score mod, expected a mask mod");
  return m;
}

ModSpec lookup_score(const std::string& spec) {
  ModSpec m = lookup(spec);
  check(!m.is_mask, "'" + spec + "' is a mask mod, expected a score mod");
  return m;
}

}  // namespace flexattn::mods
