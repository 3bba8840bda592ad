// flexattn._C: the native bridge of the Python package (python/flexattn). Typed, small, and free of
// torch: tensors cross as host arrays (DLPack) for the cpu backend and as raw device pointers for the
// cuda backend, so the extension builds and imports without torch or CUDA.
#include "convert.h"
#include "flexattn/error.h"

namespace flexattn::py {
void bind_ir(nb::module_& m);
void bind_cpu(nb::module_& m);
void bind_cuda(nb::module_& m);
void bind_paged(nb::module_& m);
}  // namespace flexattn::py

NB_MODULE(_C, m) {
  namespace nb = nanobind;
  m.doc() = "flexattn's native core: IR parsing, the cpu backend, BlockMask builders and the cuda backend.";
  // Every flexattn::Error names a bad argument, so it surfaces as a ValueError subclass.
  nb::exception<flexattn::Error>(m, "Error", PyExc_ValueError);
  m.attr("__version__") = FLEXATTN_VERSION;
  flexattn::py::bind_ir(m);
  flexattn::py::bind_cpu(m);
  flexattn::py::bind_cuda(m);
  flexattn::py::bind_paged(m);
}
