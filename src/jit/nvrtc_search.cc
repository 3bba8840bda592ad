// Where NVRTC may live; see nvrtc.h for the order and why.
#include <glob.h>

#include <algorithm>
#include <mutex>
#include <sstream>

#include "jit/nvrtc.h"
#include "jit/sys.h"

namespace flexattn::jit {

namespace {

std::vector<std::string> glob_dirs(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (glob(pattern.c_str(), GLOB_ONLYDIR | GLOB_NOSORT, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  globfree(&g);
  // Newest Python first, so a python3.12 tree wins over a python3.10 one.
  std::sort(out.rbegin(), out.rend());
  return out;
}

// Python package folders where pip puts torch's nvidia-* wheels.
std::vector<std::string> site_dirs(const NvrtcSearch& s) {
  std::vector<std::string> sites;
  auto add_glob = [&](const std::string& pattern) {
    for (auto& d : glob_dirs(pattern)) sites.push_back(d);
  };
  for (const std::string& d : s.python_sites) sites.push_back(d);
  if (!s.virtual_env.empty()) add_glob(s.virtual_env + "/lib/python3*/site-packages");
  if (!s.conda_prefix.empty()) add_glob(s.conda_prefix + "/lib/python3*/site-packages");
  std::stringstream pp(s.pythonpath);
  for (std::string d; std::getline(pp, d, ':');)
    if (!d.empty()) sites.push_back(d);
  if (!s.home.empty()) add_glob(s.home + "/.local/lib/python3*/site-packages");
  sites.push_back(s.root + "/usr/lib/python3/dist-packages");
  add_glob(s.root + "/usr/local/lib/python3*/dist-packages");
  add_glob(s.root + "/usr/local/lib/python3*/site-packages");
  add_glob(s.root + "/opt/*/.venv/lib/python3*/site-packages");
  return sites;
}

std::mutex g_sites_mu;
std::vector<std::string> g_python_sites;

}  // namespace

void set_python_sites(std::vector<std::string> dirs) {
  std::lock_guard<std::mutex> lock(g_sites_mu);
  g_python_sites = std::move(dirs);
}

NvrtcSearch NvrtcSearch::from_environment() {
  NvrtcSearch s;
  s.override_path = env_or("FLEXATTN_NVRTC");
  s.cuda_home = env_or("CUDA_HOME", env_or("CUDA_PATH"));
  s.virtual_env = env_or("VIRTUAL_ENV");
  s.conda_prefix = env_or("CONDA_PREFIX");
  s.pythonpath = env_or("PYTHONPATH");
  s.home = env_or("HOME");
  std::lock_guard<std::mutex> lock(g_sites_mu);
  s.python_sites = g_python_sites;
  return s;
}

std::vector<std::string> nvrtc_search_dirs(const NvrtcSearch& s) {
  std::vector<std::string> dirs;
  if (!s.cuda_home.empty()) dirs.push_back(s.cuda_home + "/lib64");
  dirs.push_back(s.root + "/usr/local/cuda/lib64");
  dirs.push_back(s.root + "/usr/local/cuda/targets/x86_64-linux/lib");
  for (const auto& site : site_dirs(s))
    for (const char* sub : {"/nvidia/cu13/lib", "/nvidia/cuda_nvrtc/lib"}) dirs.push_back(site + sub);
  std::vector<std::string> out;
  for (auto& d : dirs)
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  return out;
}

}  // namespace flexattn::jit
