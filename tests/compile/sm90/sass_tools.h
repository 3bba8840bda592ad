#pragma once
// cuobjdump access for the compile tier: SASS of a cubin, when the toolkit's disassembler is present.
#include <optional>
#include <string>

namespace flexattn::testing_sass {

// cuobjdump -sass of the cubin bytes, or nullopt (with *why) when cuobjdump / nvdisasm cannot be run.
// Looks in $CUDA_HOME/bin, /usr/local/cuda/bin, then PATH.
std::optional<std::string> disassemble(const std::string& cubin, std::string* why);

// Occurrences of `needle` in `text`.
int count(const std::string& text, const std::string& needle);

// The SASS of one entry of a multi-entry cubin (cuobjdump prints "Function : <name>" before each); "" if
// absent.
std::string function_sass(const std::string& sass, const std::string& name);

// The bytes of the ELF section `name` of a cubin (e.g. ".text.flexattn_fwd": the kernel's machine code, which
// two sources with the same code share even where their symbol tables differ); nullopt if absent. Needs no
// disassembler.
std::optional<std::string> elf_section(const std::string& cubin, const std::string& name);

// Highest general register index (R<n>) named in the SASS, -1 if none.
int max_register(const std::string& sass);

// Highest register of a warp-specialized entry's producer code: from its setmaxnreg.dec (USETMAXREG.DEALLOC) to the
// function's last EXIT (out-of-line subroutines, e.g. the consumers' division slow path, come after it); nullopt
// when either marker is missing.
std::optional<int> producer_max_register(const std::string& sass);

}  // namespace flexattn::testing_sass
