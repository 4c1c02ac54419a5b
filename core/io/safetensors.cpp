#include "nabla/core/io/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>

#include "nabla/core/error.h"

namespace nabla::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts would need byte swapping");

namespace {

using nlohmann::json;

const char* dtype_code(DType dt) {
  switch (dt) {
    case DType::Float32:
      return "F32";
    case DType::Float64:
      return "F64";
    case DType::Int64:
      return "I64";
    case DType::Bool:
      return "BOOL";
    case DType::BFloat16:
      return "BF16";
    case DType::Float16:
      return "F16";
  }
  return "?";
}

bool parse_dtype(const std::string& code, DType& out) {
  if (code == "F32")
    out = kFloat32;
  else if (code == "F64")
    out = kFloat64;
  else if (code == "I64")
    out = kInt64;
  else if (code == "BOOL")
    out = kBool;
  else if (code == "BF16")
    out = kBFloat16;
  else if (code == "F16")
    out = kFloat16;
  else
    return false;
  return true;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// A real header nests three levels (object, entry, shape). Deeper input is rejected before it is
// parsed: nlohmann's dump() (used for error messages) and copies recurse once per level, and
// 100k levels (the 100 MB header cap allows them) would overflow the stack.
constexpr int kMaxHeaderDepth = 64;

// The header offset of the first '[' or '{' nested deeper than kMaxHeaderDepth, or npos.
size_t too_deep_at(std::string_view header) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < header.size(); ++i) {
    const char c = header[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxHeaderDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// nlohmann's DOM builder, except that a parse error (bad syntax, or a number such as 1e400 that
// no double holds, which nlohmann reports as out_of_range rather than parse_error) is recorded
// with its position instead of thrown.
struct HeaderSax : nlohmann::detail::json_sax_dom_parser<json> {
  using Base = nlohmann::detail::json_sax_dom_parser<json>;
  size_t error_position = 0;
  std::string error;
  explicit HeaderSax(json& out) : Base(out, false) {}
  bool parse_error(size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& e) {
    error_position = position;
    error = e.what();
    return false;
  }
};

json parse_header(std::string_view text, const std::function<FormatError(std::string)>& fail) {
  if (size_t at = too_deep_at(text); at != std::string_view::npos)
    throw fail(
        fmt::format("header JSON nests deeper than {} levels at byte {} of the header "
                    "(file offset {})",
                    kMaxHeaderDepth, at, 8 + at));
  json header;
  HeaderSax sax(header);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const json::exception& e) {  // belt and braces: nothing of nlohmann's escapes
    throw fail(fmt::format("header JSON is invalid: {}", e.what()));
  }
  if (!ok)
    throw fail(fmt::format("header JSON is invalid (byte {} of the header, file offset {}): {}",
                           sax.error_position, 8 + sax.error_position, sax.error));
  return header;
}

// A JSON value for an error message, cut short: the value may be megabytes long.
std::string brief(const json& v) {
  std::string text = v.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// Validates every tensor entry of the header against the data section (sizes, offsets, dtypes)
// and collects __metadata__; nothing is allocated yet.
std::vector<Entry> read_entries(const json& header, uint64_t data_start, uint64_t data_size,
                                Metadata& metadata,
                                const std::function<FormatError(std::string)>& fail) {
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw fail("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw fail(fmt::format("__metadata__ value for '{}' is not a string", m.key()));
        metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) {
      return fail(fmt::format("tensor '{}': {}", name, what));
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      throw bad("entry needs dtype, shape and data_offsets");
    Entry e;
    e.name = name;
    if (!v["dtype"].is_string() || !parse_dtype(v["dtype"].get<std::string>(), e.dtype))
      throw bad(fmt::format("unsupported dtype {} (nabla reads F32, F64, BF16, F16, I64, BOOL)",
                            brief(v["dtype"])));
    if (!v["shape"].is_array()) throw bad("shape is not an array");
    uint64_t numel = 1;
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned())
        throw bad(fmt::format("shape entry {} is not a non-negative integer", brief(d)));
      auto dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(INT64_MAX) || (dim != 0 && numel > UINT64_MAX / dim))
        throw bad("shape overflows");
      numel *= dim;
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    try {  // strides must fit too: (0, 3221225511, 3921674336) holds no bytes but cannot be laid
           // out
      (void)contiguous_strides(e.shape);
    } catch (const ShapeError& err) {
      throw bad(err.what());
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw bad("data_offsets must be two non-negative integers");
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    if (e.begin > e.end)
      throw bad(fmt::format("data_offsets [{}, {}] are reversed", e.begin, e.end));
    if (e.end > data_size)
      throw bad(
          fmt::format("data_offsets [{}, {}] (file offsets {}..{}) run past the end of the "
                      "{}-byte data section",
                      e.begin, e.end, data_start + e.begin, data_start + e.end, data_size));
    const uint64_t elem = dtype_size(e.dtype);
    if (numel > UINT64_MAX / elem) throw bad("byte size overflows");
    if (e.end - e.begin != numel * elem)
      throw bad(fmt::format("{} bytes at data_offsets [{}, {}] but shape {} of {} needs {}",
                            e.end - e.begin, e.begin, e.end, shape_str(e.shape),
                            dtype_code(e.dtype), numel * elem));
    entries.push_back(std::move(e));
  }
  return entries;
}

// A string for an error message: bytes outside printable ASCII as \xNN, cut short.
std::string escaped(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 40))
    out += c >= 0x20 && c < 0x7f && c != '\\' ? std::string(1, static_cast<char>(c))
                                              : fmt::format("\\x{:02x}", c);
  return s.size() > 40 ? out + "..." : out;
}

// The header is JSON, which holds only UTF-8 text: names the first name, key or value that is
// not (nlohmann's dump() refused it without saying which).
ValueError not_utf8(const NamedTensors& tensors, const Metadata& metadata) {
  auto bad = [](const std::string& s) {
    try {
      (void)json(s).dump();
      return false;
    } catch (const json::type_error&) {
      return true;
    }
  };
  auto error = [](const std::string& what, const std::string& s) {
    return ValueError(fmt::format(
        "save_safetensors: {} '{}' is not valid UTF-8 (the header is JSON)", what, escaped(s)));
  };
  for (const auto& [name, t] : tensors)
    if (bad(name)) return error("tensor name", name);
  for (const auto& [key, value] : metadata) {
    if (bad(key)) return error("metadata key", key);
    if (bad(value)) return error(fmt::format("value of metadata key '{}'", escaped(key)), value);
  }
  return ValueError("save_safetensors: the header is not valid UTF-8");
}

}  // namespace

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  if (const Tensor* t = find(name)) return *t;
  throw FormatError(fmt::format("{}: no tensor named '{}'", source, name));
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& source) {
  auto fail = [&](const std::string& msg) { return FormatError(source + ": " + msg); };
  if (bytes.size() < 8)
    throw fail(
        fmt::format("file is {} bytes, too short for the 8-byte header length", bytes.size()));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes)
    throw fail(
        fmt::format("header length {} at offset 0 exceeds the {} byte limit", n, kMaxHeaderBytes));
  if (n > bytes.size() - 8)
    throw fail(fmt::format("header length {} at offset 0 runs past the end of the {}-byte file", n,
                           bytes.size()));
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = bytes.size() - data_start;

  const json header = parse_header(std::string_view(bytes).substr(8, n), fail);
  if (!header.is_object()) throw fail("header JSON is not an object");

  SafetensorsFile file;
  file.source = source;
  std::vector<Entry> entries;
  try {
    entries = read_entries(header, data_start, data_size, file.metadata, fail);
  } catch (const json::exception& e) {  // a type the checks above missed: still a FormatError
    throw fail(fmt::format("header JSON has an unexpected shape: {}", e.what()));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  uint64_t covered = 0;
  for (const Entry& e : entries) {
    if (e.begin < covered)
      throw fail(
          fmt::format("tensor '{}' at data_offsets [{}, {}] overlaps the previous tensor "
                      "(which ends at {})",
                      e.name, e.begin, e.end, covered));
    if (e.begin > covered)
      throw fail(fmt::format("data bytes {}..{} (file offset {}) belong to no tensor", covered,
                             e.begin, data_start + covered));
    covered = e.end;
  }
  if (covered != data_size)
    throw fail(fmt::format("data bytes {}..{} (file offset {}) belong to no tensor", covered,
                           data_size, data_start + covered));

  // Everything is valid: allocate and copy.
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, e.dtype);
    if (e.end > e.begin)
      std::memcpy(t.storage()->data(), bytes.data() + data_start + e.begin, e.end - e.begin);
    if (e.dtype == kBool) {
      const auto* p = static_cast<const uint8_t*>(t.storage()->data());
      for (uint64_t i = 0; i < e.end - e.begin; ++i)
        if (p[i] > 1)
          throw fail(fmt::format("tensor '{}': byte {} (file offset {}) is not a valid bool",
                                 e.name, i, data_start + e.begin + i));
    }
    file.tensors.emplace_back(e.name, t);
  }
  return file;
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IOError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool is_dir = S_ISDIR(st.st_mode);
    ::close(fd);
    throw IOError(fmt::format("{}: {}", path,
                              is_dir ? "is a directory, not a file" : "is not a regular file"));
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      ::close(fd);
      throw IOError(
          fmt::format("{}: read failed at offset {} ({})", path, out.size(), std::strerror(err)));
    }
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return out;
}

SafetensorsFile load_safetensors(const std::string& path) {
  return parse_safetensors(read_file(path), path);
}

std::string serialize_safetensors(const NamedTensors& tensors, const Metadata& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  std::vector<Tensor> payload;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") throw ValueError("save_safetensors: '__metadata__' is reserved");
    if (header.contains(name))
      throw ValueError(fmt::format("save_safetensors: duplicate tensor name '{}'", name));
    Tensor c = t.detach().contiguous();
    const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", dtype_code(c.dtype())},
                    {"shape", c.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    payload.push_back(c);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string h;
  try {
    h = header.dump();
  } catch (const json::type_error&) {  // found by fuzzing: escaped as nlohmann's type_error
    throw not_utf8(tensors, metadata);
  }
  h.append((8 - h.size() % 8) % 8, ' ');  // align the data section to 8 bytes
  std::string out(8, '\0');
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  out += h;
  out.reserve(out.size() + offset);
  for (const Tensor& c : payload)
    out.append(static_cast<const char*>(c.storage()->data()) +
                   c.offset() * static_cast<int64_t>(dtype_size(c.dtype())),
               static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  return out;
}

void atomic_write(const std::string& path, const std::string& bytes) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IOError(fmt::format("{}: cannot create ({})", tmp, std::strerror(errno)));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw IOError(
          fmt::format("{}: write failed at offset {} ({})", tmp, done, std::strerror(err)));
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw IOError(fmt::format("{}: fsync/close failed ({})", tmp, std::strerror(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw IOError(fmt::format("{}: rename from {} failed ({})", path, tmp, std::strerror(err)));
  }
  // Persist the rename itself.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  atomic_write(path, serialize_safetensors(tensors, metadata));
}

}  // namespace nabla::io
