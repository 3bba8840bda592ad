#include "jit/cache_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "jit/json.h"
#include "jit/sha256.h"
#include "jit/sys.h"
#include "jit/text_match.h"

namespace flexattn::jit::disk {
namespace fs = std::filesystem;

namespace {

constexpr int kFormat = 1;

// Unique within the machine: pid + a per-process counter.
std::string unique_suffix() {
  static std::atomic<int> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Folder names cache_clear may delete. Anything else in the cache folder is left alone, so a cache
// folder pointed at the wrong place ($HOME) does not lose unrelated files.
bool is_entry_name(const std::string& name) {
  // <name chars>+ '_' <16 lowercase hex digits>
  if (name.size() < 18 || name[0] == '.' || name[name.size() - 17] != '_') return false;
  const std::string_view s(name);
  return text::all_of(s.substr(0, s.size() - 17), text::is_name_char) &&
         text::all_of(s.substr(s.size() - 16), text::is_hex_lower);
}
// ".tmp-<entry>-<pid>-<n>" (write_entry) or ".trash-<entry>-<pid>-<n>" (discard_entry).
bool is_scratch_name(const std::string& name) {
  std::string_view s(name);
  if (s.rfind(".tmp-", 0) == 0) s.remove_prefix(5);
  else if (s.rfind(".trash-", 0) == 0) s.remove_prefix(7);
  else return false;
  for (int i = 0; i < 2; ++i) {  // the counter, then the pid
    const size_t dash = s.rfind('-');
    if (dash == std::string_view::npos || dash + 1 == s.size() ||
        !text::all_of(s.substr(dash + 1), text::is_digit))
      return false;
    s = s.substr(0, dash);
  }
  return is_entry_name(std::string(s));
}

// A folder the cache could have written: only plain files of the names it writes there (no subfolders, links
// or anything else). Its name alone is not enough: a user's folder may be called `failed` or `.tmp-notes`.
bool holds_only(const fs::path& dir, std::initializer_list<std::string_view> names) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (it->symlink_status(ec).type() != fs::file_type::regular || ec) return false;
    if (std::find(names.begin(), names.end(), f) == names.end()) return false;
  }
  return !ec;
}
bool is_real_folder(const fs::directory_entry& d) {
  std::error_code ec;
  return d.symlink_status(ec).type() == fs::file_type::directory && !ec;
}

Json ptxas_json(const std::map<std::string, PtxasInfo>& ptxas) {
  Json j = Json::object();
  for (const auto& [name, p] : ptxas) {
    Json e = Json::object();
    e.set("registers", Json::of(p.registers));
    e.set("spill_stores", Json::of(double(p.spill_stores)));
    e.set("spill_loads", Json::of(double(p.spill_loads)));
    e.set("smem", Json::of(double(p.smem)));
    e.set("stack", Json::of(double(p.stack)));
    j.set(name, e);
  }
  return j;
}

std::map<std::string, PtxasInfo> ptxas_from(const Json* j) {
  std::map<std::string, PtxasInfo> out;
  if (!j || j->kind != Json::Kind::object) return out;
  for (const auto& [name, e] : j->fields) {
    PtxasInfo p;
    p.registers = int(e.get_number("registers").value_or(0));
    p.spill_stores = int64_t(e.get_number("spill_stores").value_or(0));
    p.spill_loads = int64_t(e.get_number("spill_loads").value_or(0));
    p.smem = int64_t(e.get_number("smem").value_or(0));
    p.stack = int64_t(e.get_number("stack").value_or(0));
    out[name] = p;
  }
  return out;
}


// Validates meta.json + kernel.cubin of one entry folder; fills `meta` on success.
bool validate(const fs::path& entry, Json& meta, std::string& cubin, std::string* problem) {
  auto meta_text = read_file((entry / "meta.json").string());
  if (!meta_text) return *problem = "meta.json is missing", false;
  auto parsed = parse_json(*meta_text);
  if (!parsed || parsed->kind != Json::Kind::object) return *problem = "meta.json is not valid JSON", false;
  meta = std::move(*parsed);
  if (meta.get_number("format") != double(kFormat)) return *problem = "meta.json has an unknown format", false;
  auto c = read_file((entry / "kernel.cubin").string());
  if (!c) return *problem = "kernel.cubin is missing", false;
  cubin = std::move(*c);
  if (meta.get_number("cubin_bytes") != double(cubin.size()))
    return *problem = "kernel.cubin has " + std::to_string(cubin.size()) + " bytes, meta.json says otherwise", false;
  const std::string* want = meta.get_string("cubin_sha256");
  if (!want || *want != sha256_hex(cubin)) return *problem = "kernel.cubin does not match its SHA-256", false;
  return true;
}

int64_t folder_bytes(const fs::path& p) {
  int64_t total = 0;
  std::error_code ec;
  for (const auto& f : fs::recursive_directory_iterator(p, ec))
    if (f.is_regular_file(ec)) total += int64_t(f.file_size(ec));
  return total;
}

}  // namespace

ReadStatus read_entry(const std::string& dir, const std::string& key, const std::string& source,
                      CompiledKernel* out, std::string* problem) {
  fs::path entry = fs::path(dir) / key;
  std::error_code ec;
  if (!fs::is_directory(entry, ec)) return ReadStatus::missing;
  Json meta;
  std::string cubin;
  if (!validate(entry, meta, cubin, problem)) return ReadStatus::corrupt;
  const std::string* k = meta.get_string("key");
  if (!k || *k != key) return *problem = "meta.json names another key", ReadStatus::corrupt;
  auto stored_source = read_file((entry / "source.cu").string());
  if (!stored_source || *stored_source != source)
    return *problem = "source.cu differs from the requested source", ReadStatus::corrupt;
  out->key = key;
  const std::string* arch = meta.get_string("arch");
  out->arch = arch ? *arch : "";
  out->cubin = std::make_shared<const std::string>(std::move(cubin));
  out->ptxas = ptxas_from(meta.get("ptxas"));
  const std::string* log = meta.get_string("log");
  out->log = log ? *log : "";
  out->entry_dir = entry.string();
  out->origin = CompiledKernel::Origin::disk;
  return ReadStatus::found;
}

std::string write_entry(const std::string& dir, const CompiledKernel& k, const std::string& source,
                        const WriteInfo& info, bool* lost) {
  *lost = false;
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::path tmp = fs::path(dir) / (".tmp-" + k.key + "-" + unique_suffix());
  if (!fs::create_directory(tmp, ec)) return "";
  Json meta = Json::object();
  meta.set("format", Json::of(kFormat));
  meta.set("key", Json::of(k.key));
  meta.set("arch", Json::of(k.arch));
  meta.set("options", Json::of(info.options));
  meta.set("kernel_names", Json::of(k.kernel_names));
  meta.set("nvrtc_version", Json::of(info.nvrtc_version));
  meta.set("library_version", Json::of(info.library_version));
  meta.set("header_bundle_sha256", Json::of(info.bundle_hash));
  meta.set("source_bytes", Json::of(double(source.size())));
  meta.set("cubin_bytes", Json::of(double(k.cubin->size())));
  meta.set("cubin_sha256", Json::of(sha256_hex(*k.cubin)));
  meta.set("ptxas", ptxas_json(k.ptxas));
  meta.set("log", Json::of(k.log));
  meta.set("compile_ms", Json::of(double(int64_t(info.compile_ms))));
  meta.set("created", Json::of(utc_timestamp()));
  // meta.json last: an entry folder missing it is recognisably incomplete.
  bool ok = write_file((tmp / "source.cu").string(), source) && write_file((tmp / "kernel.cubin").string(), *k.cubin) &&
            write_file((tmp / "meta.json").string(), to_json(meta) + "\n");
  fs::path dest = fs::path(dir) / k.key;
  if (ok && ::rename(tmp.c_str(), dest.c_str()) == 0) return dest.string();
  int err = errno;
  fs::remove_all(tmp, ec);
  if (ok && (err == EEXIST || err == ENOTEMPTY)) {
    *lost = true;
    return dest.string();
  }
  return "";
}

void discard_entry(const std::string& entry_dir) {
  fs::path entry(entry_dir);
  fs::path trash = entry.parent_path() / (".trash-" + entry.filename().string() + "-" + unique_suffix());
  std::error_code ec;
  if (::rename(entry.c_str(), trash.c_str()) == 0) fs::remove_all(trash, ec);
}

std::string save_failed(const std::string& dir, const std::string& key, const std::string& source,
                        const std::string& log) {
  fs::path folder = fs::path(dir) / "failed" / key;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return "";
  bool ok = write_file((folder / "source.cu").string(), source) && write_file((folder / "log.txt").string(), log);
  return ok ? folder.string() : "";
}

std::vector<CacheEntry> list_entries(const std::string& dir) {
  std::vector<CacheEntry> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(dir, ec)) {
    std::string name = d.path().filename().string();
    if (!d.is_directory(ec) || !is_entry_name(name)) continue;
    CacheEntry e;
    e.key = name;
    e.bytes = folder_bytes(d.path());
    Json meta;
    std::string cubin, problem;
    e.valid = validate(d.path(), meta, cubin, &problem) && meta.get_string("key") && *meta.get_string("key") == name;
    if (const std::string* s = meta.get_string("arch")) e.arch = *s;
    if (const std::string* s = meta.get_string("nvrtc_version")) e.nvrtc_version = *s;
    if (const std::string* s = meta.get_string("created")) e.created = *s;
    out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) { return a.key < b.key; });
  return out;
}

int clear_entries(const std::string& dir) {
  int removed = 0;
  std::error_code ec;
  std::vector<fs::path> entries, scratch;
  for (const auto& d : fs::directory_iterator(dir, ec)) {
    const std::string name = d.path().filename().string();
    if (!is_real_folder(d) || !holds_only(d.path(), {"source.cu", "kernel.cubin", "meta.json"})) continue;
    if (is_entry_name(name)) entries.push_back(d.path());
    else if (is_scratch_name(name)) scratch.push_back(d.path());
  }
  // failed/<entry>/{source.cu, log.txt} (save_failed); `failed` itself only once nothing else is left in it.
  const fs::path failed = fs::path(dir) / "failed";
  const bool have_failed = fs::symlink_status(failed, ec).type() == fs::file_type::directory;
  if (have_failed)
    for (const auto& d : fs::directory_iterator(failed, ec))
      if (is_real_folder(d) && is_entry_name(d.path().filename().string()) &&
          holds_only(d.path(), {"source.cu", "log.txt"}))
        scratch.push_back(d.path());
  for (const auto& p : entries) discard_entry(p.string()), ++removed;
  for (const auto& p : scratch) fs::remove_all(p, ec);
  if (have_failed) fs::remove(failed, ec);  // fails, as wanted, while anything is left in it
  return removed;
}

}  // namespace flexattn::jit::disk
