#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0) <-> HostTensor.
//
// Supported element types, little-endian and C order only: float32 '<f4', float64 '<f8', float16 '<f2',
// int32 '<i4', int64 '<i8', bool '|b1'. NumPy has no bfloat16, so a BF16 tensor is written as float32
// holding exactly its bf16 values (every bf16 is a float32), and reads back as F32.
// Every failure is a flexattn::Error whose message starts with "<path>: " and says what was expected.
#include <string>

#include "flexattn/tensor.h"

namespace flexattn::npy {

HostTensor read(const std::string& path);
// Writes version 1.0 (2.0 when the header exceeds 65535 bytes), header padded to a multiple of 64 bytes
// as numpy does.
void write(const std::string& path, const HostTensor& t);

// The numpy descr a tensor of this dtype is written with ("<f4", "|b1", ...).
std::string descr(DType t);

}  // namespace flexattn::npy
