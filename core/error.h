// Error types. Every message names the op (or file) and the offending shapes, dtypes or offsets.
#pragma once
#include <stdexcept>
#include <string>

namespace nabla {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ShapeError : Error {
  using Error::Error;
};
struct DTypeError : Error {
  using Error::Error;
};
struct ValueError : Error {
  using Error::Error;
};
// An index outside its dimension (select, index_select, gather, embedding, ...), as PyTorch's
// IndexError; the message names the op, the index, the dimension and its size.
struct IndexError : Error {
  using Error::Error;
};
struct IOError : Error {
  using Error::Error;
};
struct FormatError : Error {
  using Error::Error;
};
// A request for more memory than the machine has, or an allocation the system refused; the
// message names the bytes requested (and the shape, where a tensor asked).
struct OutOfMemoryError : Error {
  using Error::Error;
};
// Raised by the autograd engine (second backward, modified saved tensor, anomaly).
struct AutogradError : Error {
  using Error::Error;
};

}  // namespace nabla
