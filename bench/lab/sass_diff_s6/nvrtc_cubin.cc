// NVRTC compile of one generated source with kernels/ headers from a directory (-I) instead of the
// library's embedded bundle, with the options the JIT uses (src/jit/nvrtc.cc: --gpu-architecture,
// --ptxas-options=-v, --no-cache; FLEXATTN_JIT_FAST_COMPILE unset). Writes the cubin and the log.
// Usage: nvrtc_cubin SRC.cu KERNELS_DIR ARCH OUT.cubin OUT.log   (NVRTC_PTX_OUT=file: the PTX too)
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: nvrtc_cubin SRC.cu KERNELS_DIR ARCH OUT.cubin OUT.log\n");
    return 2;
  }
  std::stringstream src;
  src << std::ifstream(argv[1]).rdbuf();
  const std::string text = src.str();
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, text.c_str(), argv[1], 0, nullptr, nullptr) != NVRTC_SUCCESS) return 3;
  const std::string arch = std::string("--gpu-architecture=") + argv[3], inc = std::string("-I") + argv[2];
  std::vector<const char*> opts = {arch.c_str(), "--ptxas-options=-v", "--no-cache", inc.c_str()};
  const nvrtcResult rc = nvrtcCompileProgram(prog, int(opts.size()), opts.data());
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  std::string log(n, '\0');
  nvrtcGetProgramLog(prog, log.data());
  std::ofstream(argv[5]) << log.c_str();
  if (rc != NVRTC_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n%s\n", argv[1], nvrtcGetErrorString(rc), log.c_str());
    return 1;
  }
  if (const char* ptx_out = std::getenv("NVRTC_PTX_OUT")) {  // debugging: the PTX as well
    nvrtcGetPTXSize(prog, &n);
    std::string ptx(n, '\0');
    nvrtcGetPTX(prog, ptx.data());
    std::ofstream(ptx_out) << ptx.c_str();
  }
  nvrtcGetCUBINSize(prog, &n);
  std::string cubin(n, '\0');
  nvrtcGetCUBIN(prog, cubin.data());
  std::ofstream(argv[4], std::ios::binary) << cubin;
  nvrtcDestroyProgram(&prog);
  return 0;
}
