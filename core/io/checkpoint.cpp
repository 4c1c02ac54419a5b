// io::Checkpoint: sections of named tensors and typed scalars in one safetensors file. The
// metadata encoding and the validation rules are described in checkpoint.h.
#include "nabla/core/io/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string_view>

#include "nabla/core/error.h"
#include "nabla/core/parallel.h"

namespace nabla::io {

namespace {

constexpr const char* kFormatKey = "nabla.format";
constexpr const char* kFormatValue = "checkpoint/2";
constexpr const char* kFormatBeforeChecksums = "checkpoint/1";
constexpr const char* kSectionsKey = "nabla.sections";
constexpr const char* kChecksumKey = "nabla.crc32";
constexpr const char* kThreadsKey = "nabla.threads";
constexpr const char* kVersionKey = "nabla.version";
// "1" when saved in deterministic mode (absent otherwise): then any thread count resumes exactly.
constexpr const char* kDeterministicKey = "nabla.deterministic";
// The checksum field exactly as serialize_safetensors writes it (compact JSON). Inside a JSON
// string every '"' is escaped, so this text can only be a key with a string value.
constexpr std::string_view kChecksumField = "\"nabla.crc32\":\"";
constexpr size_t kChecksumDigits = 8;

// Where the checksum's hex digits start in the file; FormatError unless the field is in the
// header exactly once.
size_t checksum_digits_at(const std::string& bytes, const std::string& source) {
  uint64_t header = 0;
  if (bytes.size() >= 8) std::memcpy(&header, bytes.data(), 8);
  const std::string_view text =
      std::string_view(bytes).substr(0, 8 + std::min<uint64_t>(header, bytes.size() - 8));
  size_t at = std::string_view::npos, count = 0;
  for (size_t pos = text.find(kChecksumField, 8); pos != std::string_view::npos;
       pos = text.find(kChecksumField, pos + 1)) {
    at = pos + kChecksumField.size();
    ++count;
  }
  if (count != 1 || at + kChecksumDigits >= text.size() || text[at + kChecksumDigits] != '"')
    throw FormatError(fmt::format(
        "{}: the checksum field '{}' appears {} times in the header, not once with {} hex digits",
        source, kChecksumKey, count, kChecksumDigits));
  return at;
}

bool valid_section_name(const std::string& name) {
  return !name.empty() && name.find_first_of(".,") == std::string::npos;
}

const char* type_name(const Checkpoint::Value& v) {
  switch (v.index()) {
    case 0:
      return "int";
    case 1:
      return "uint";
    case 2:
      return "float";
    default:
      return "str";
  }
}

// "<type>:<text>" for the file.
std::string encode(const Checkpoint::Value& v) {
  std::string text;
  if (const auto* i = std::get_if<int64_t>(&v))
    text = fmt::format("{}", *i);
  else if (const auto* u = std::get_if<uint64_t>(&v))
    text = fmt::format("{}", *u);
  else if (const auto* d = std::get_if<double>(&v))
    text = fmt::format("{}", *d);  // shortest text that reads back to the same double
  else
    text = std::get<std::string>(v);
  return std::string(type_name(v)) + ":" + text;
}

// Parses all of `text` as a T with std::from_chars; false on any leftover or overflow.
template <class T>
bool parse_number(const std::string& text, T& out) {
  if (text.empty() || text[0] == '+') return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end;
}

// The inverse of encode; an empty optional (with `why` set) when the text is malformed.
std::optional<Checkpoint::Value> decode(const std::string& encoded, std::string& why) {
  const size_t colon = encoded.find(':');
  if (colon == std::string::npos) {
    why = "has no '<type>:' prefix (int, uint, float or str)";
    return std::nullopt;
  }
  const std::string type = encoded.substr(0, colon), text = encoded.substr(colon + 1);
  if (type == "str") return Checkpoint::Value(text);
  if (type == "int") {
    int64_t i = 0;
    if (parse_number(text, i)) return Checkpoint::Value(i);
  } else if (type == "uint") {
    uint64_t u = 0;
    if (!text.empty() && text[0] != '-' && parse_number(text, u)) return Checkpoint::Value(u);
  } else if (type == "float") {
    double d = 0;
    if (parse_number(text, d)) return Checkpoint::Value(d);
  } else {
    why = fmt::format("has unknown type '{}' (expected int, uint, float or str)", type);
    return std::nullopt;
  }
  why = fmt::format("'{}' is not a valid {}", text, type);
  return std::nullopt;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t begin = 0;
  for (;;) {
    const size_t comma = s.find(',', begin);
    out.push_back(s.substr(begin, comma - begin));
    if (comma == std::string::npos) return out;
    begin = comma + 1;
  }
}

}  // namespace

uint32_t checkpoint_checksum(const std::string& bytes, const std::string& source) {
  const size_t at = checksum_digits_at(bytes, source);
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  uLong crc = crc32_z(0L, p, at);
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>("00000000"), kChecksumDigits);
  crc = crc32_z(crc, p + at + kChecksumDigits, bytes.size() - at - kChecksumDigits);
  return static_cast<uint32_t>(crc);
}

const char* nabla_version() { return NABLA_VERSION; }

// ----------------------------------------------------------------------------
// sections

void Checkpoint::put_section(const std::string& name, NamedTensors tensors) {
  if (!valid_section_name(name))
    throw ValueError(fmt::format(
        "Checkpoint.put_section: section name '{}' must be non-empty without '.' or ','", name));
  for (const auto& [key, t] : tensors) {
    if (key.empty())
      throw ValueError(fmt::format(
          "Checkpoint.put_section: section '{}' has a tensor with an empty name", name));
    if (!t.defined())
      throw ValueError(fmt::format(
          "Checkpoint.put_section: tensor '{}' of section '{}' is undefined", key, name));
  }
  for (Section& s : sections_)
    if (s.name == name) {
      s.tensors = std::move(tensors);
      return;
    }
  sections_.push_back({name, std::move(tensors)});
}

bool Checkpoint::has_section(const std::string& name) const {
  return std::any_of(sections_.begin(), sections_.end(),
                     [&](const Section& s) { return s.name == name; });
}

const NamedTensors& Checkpoint::section(const std::string& name) const {
  for (const Section& s : sections_)
    if (s.name == name) return s.tensors;
  const std::vector<std::string> names = section_names();
  throw FormatError(
      fmt::format("{}: checkpoint has no section '{}' (sections: {})",
                  source_.empty() ? "<in-memory checkpoint>" : source_, name,
                  names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
}

std::vector<std::string> Checkpoint::section_names() const {
  std::vector<std::string> out;
  for (const Section& s : sections_) out.push_back(s.name);
  return out;
}

// ----------------------------------------------------------------------------
// scalars

void Checkpoint::set_value(const std::string& key, Value value) {
  if (key.empty() || key.rfind("nabla.", 0) == 0)
    throw ValueError(fmt::format(
        "Checkpoint.set: key '{}' must be non-empty and not start with 'nabla.' (reserved)", key));
  values_[key] = std::move(value);
}

bool Checkpoint::has(const std::string& key) const { return values_.count(key) != 0; }

void Checkpoint::fail(const std::string& key, const std::string& what) const {
  throw FormatError(fmt::format("{}: checkpoint key '{}' {}",
                                source_.empty() ? "<in-memory checkpoint>" : source_, key, what));
}

const Checkpoint::Value& Checkpoint::value(const std::string& key, const char* wanted) const {
  auto it = values_.find(key);
  if (it == values_.end()) fail(key, fmt::format("is missing (wanted a {})", wanted));
  return it->second;
}

int64_t Checkpoint::get_int(const std::string& key) const {
  const Value& v = value(key, "int");
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&v); u && *u <= static_cast<uint64_t>(INT64_MAX))
    return static_cast<int64_t>(*u);
  fail(key, fmt::format("holds {}, not an int", encode(v)));
}

uint64_t Checkpoint::get_uint(const std::string& key) const {
  const Value& v = value(key, "uint");
  if (const auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v); i && *i >= 0) return static_cast<uint64_t>(*i);
  fail(key, fmt::format("holds {}, not a uint", encode(v)));
}

double Checkpoint::get_float(const std::string& key) const {
  const Value& v = value(key, "float");
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  fail(key, fmt::format("holds {}, not a float", encode(v)));
}

const std::string& Checkpoint::get_string(const std::string& key) const {
  const Value& v = value(key, "str");
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  fail(key, fmt::format("holds {}, not a str", encode(v)));
}

std::vector<std::string> Checkpoint::keys() const {
  std::vector<std::string> out;
  for (const auto& [key, v] : values_) out.push_back(key);
  return out;
}

// ----------------------------------------------------------------------------
// files

std::string Checkpoint::serialize() const {
  NamedTensors all;
  std::vector<std::string> names;
  for (const Section& s : sections_) {
    names.push_back(s.name);
    for (const auto& [key, t] : s.tensors) all.emplace_back(s.name + "." + key, t);
  }
  Metadata meta;
  meta[kFormatKey] = kFormatValue;
  meta[kSectionsKey] = fmt::format("{}", fmt::join(names, ","));
  meta[kThreadsKey] = std::to_string(num_threads());
  meta[kVersionKey] = NABLA_VERSION;
  if (deterministic()) meta[kDeterministicKey] = "1";
  meta[kChecksumKey] = std::string(kChecksumDigits, '0');  // filled in below
  for (const auto& [key, v] : values_) meta[key] = encode(v);
  std::string bytes = serialize_safetensors(all, meta);
  const std::string crc = fmt::format("{:08x}", checkpoint_checksum(bytes, "Checkpoint.save"));
  bytes.replace(checksum_digits_at(bytes, "Checkpoint.save"), kChecksumDigits, crc);
  return bytes;
}

void Checkpoint::save(const std::string& path) const { atomic_write(path, serialize()); }

Checkpoint Checkpoint::load(const std::string& path) { return parse(read_file(path), path); }

Checkpoint Checkpoint::parse(const std::string& bytes, const std::string& source) {
  return from_file(parse_safetensors(bytes, source), bytes);
}

void Checkpoint::warn(std::string message) {
  fmt::print(stderr, "nabla: warning: {}\n", message);
  warnings_.push_back(std::move(message));
}

Checkpoint Checkpoint::from_file(SafetensorsFile file, const std::string& bytes) {
  Checkpoint ck;
  ck.source_ = file.source;
  auto bad = [&](const std::string& what) { return FormatError(file.source + ": " + what); };

  auto format = file.metadata.find(kFormatKey);
  if (format == file.metadata.end())
    throw bad(fmt::format("not a nabla checkpoint (no '{}' in __metadata__)", kFormatKey));
  if (format->second != kFormatValue && format->second != kFormatBeforeChecksums)
    throw bad(fmt::format("unsupported checkpoint format '{}' (this build reads '{}' and '{}')",
                          format->second, kFormatValue, kFormatBeforeChecksums));
  // The checksum first: a corrupt file is reported as corrupt, whatever else it breaks.
  if (auto crc = file.metadata.find(kChecksumKey); crc != file.metadata.end()) {
    const size_t at = checksum_digits_at(bytes, file.source);
    const uint32_t actual = checkpoint_checksum(bytes, file.source);
    if (bytes.compare(at, kChecksumDigits, crc->second) != 0 ||
        crc->second != fmt::format("{:08x}", actual))
      throw bad(fmt::format(
          "checksum mismatch: '{}' holds '{}' but the file's bytes give {:08x}; the file is "
          "corrupt (truncated, a flipped byte or an edit)",
          kChecksumKey, crc->second, actual));
  } else if (format->second == kFormatValue) {
    throw bad(fmt::format("{} file without its checksum '{}' in __metadata__", kFormatValue,
                          kChecksumKey));
  } else {
    ck.warn(fmt::format("{}: written before checkpoints had checksums ({}); loaded unverified",
                        file.source, kFormatBeforeChecksums));
  }
  bool saved_deterministic = false;
  if (auto det = file.metadata.find(kDeterministicKey); det != file.metadata.end()) {
    if (det->second != "1")
      throw bad(fmt::format("'{}' holds '{}', not 1", kDeterministicKey, det->second));
    saved_deterministic = true;
  }
  if (saved_deterministic != deterministic())
    ck.warn(fmt::format(
        "{}: saved {} deterministic mode, this process runs {} it: training resumes, but not bit "
        "for bit (NABLA_DETERMINISTIC=1 or set_deterministic decides)",
        file.source, saved_deterministic ? "in" : "outside", deterministic() ? "in" : "outside"));
  if (auto threads = file.metadata.find(kThreadsKey); threads != file.metadata.end()) {
    int saved = 0;
    const std::string& text = threads->second;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), saved);
    if (ec != std::errc() || end != text.data() + text.size() || saved < 1)
      throw bad(fmt::format("'{}' holds '{}', not a thread count", kThreadsKey, text));
    if (saved != num_threads() && !(saved_deterministic && deterministic()))
      ck.warn(fmt::format(
          "{}: saved by a process with {} threads, this one has {}: training resumes, but not "
          "bit for bit (OMP_NUM_THREADS={} would)",
          file.source, saved, num_threads(), saved));
  }
  if (auto version = file.metadata.find(kVersionKey);
      version != file.metadata.end() && version->second != NABLA_VERSION)
    ck.warn(fmt::format("{}: written by nabla {}, this is nabla {}", file.source, version->second,
                        NABLA_VERSION));
  auto sections = file.metadata.find(kSectionsKey);
  if (sections == file.metadata.end())
    throw bad(fmt::format("checkpoint has no '{}' in __metadata__", kSectionsKey));
  std::set<std::string> seen;
  for (const std::string& name : split_commas(sections->second)) {
    if (!valid_section_name(name))
      throw bad(fmt::format("{} lists an invalid section name '{}'", kSectionsKey, name));
    if (!seen.insert(name).second)
      throw bad(fmt::format("{} lists section '{}' twice", kSectionsKey, name));
    ck.sections_.push_back({name, {}});
  }

  for (const auto& [key, encoded] : file.metadata) {
    if (key.rfind("nabla.", 0) == 0) {
      if (key != kFormatKey && key != kSectionsKey && key != kChecksumKey && key != kThreadsKey &&
          key != kVersionKey && key != kDeterministicKey)
        throw bad(fmt::format("unknown reserved metadata key '{}'", key));
      continue;
    }
    if (key.empty()) throw bad("metadata has an empty key");
    std::string why;
    std::optional<Value> v = decode(encoded, why);
    if (!v) throw bad(fmt::format("checkpoint key '{}' {}", key, why));
    ck.values_[key] = std::move(*v);
  }

  for (auto& [name, t] : file.tensors) {
    const size_t dot = name.find('.');
    const std::string prefix = name.substr(0, dot);
    auto it = std::find_if(ck.sections_.begin(), ck.sections_.end(),
                           [&](const Section& s) { return s.name == prefix; });
    if (dot == std::string::npos || dot + 1 == name.size() || it == ck.sections_.end())
      throw bad(fmt::format("tensor '{}' belongs to no section (sections: {})", name,
                            sections->second.empty() ? "none" : sections->second));
    it->tensors.emplace_back(name.substr(dot + 1), std::move(t));
  }
  return ck;
}

// ----------------------------------------------------------------------------
// generators and loader positions

void save_generator(Checkpoint& ck, const std::string& name, const Generator& gen) {
  ck.set("generator." + name + ".seed", gen.seed());
  ck.set("generator." + name + ".offset", gen.offset());
}

void load_generator(const Checkpoint& ck, const std::string& name, Generator& gen) {
  const uint64_t seed = ck.get_uint("generator." + name + ".seed");
  const uint64_t offset = ck.get_uint("generator." + name + ".offset");
  gen.set_state(seed, offset);
}

void save_loader_position(Checkpoint& ck, const std::string& name, LoaderPosition pos) {
  if (pos.epoch < 0 || pos.batch < 0 || pos.sample < -1 || pos.world_size < 1)
    throw ValueError(
        fmt::format("save_loader_position: '{}' has epoch {}, batch {}, sample {} and world_size "
                    "{}; epoch and batch must be >= 0, sample >= -1, world_size >= 1",
                    name, pos.epoch, pos.batch, pos.sample, pos.world_size));
  ck.set("loader." + name + ".epoch", pos.epoch);
  ck.set("loader." + name + ".batch", pos.batch);
  if (pos.sample < 0) return;  // the two-key form, as before sharding
  ck.set("loader." + name + ".sample", pos.sample);
  ck.set("loader." + name + ".world_size", pos.world_size);
}

LoaderPosition load_loader_position(const Checkpoint& ck, const std::string& name) {
  const std::string key = "loader." + name;
  LoaderPosition pos{ck.get_int(key + ".epoch"), ck.get_int(key + ".batch")};
  if (ck.has(key + ".sample")) {
    pos.sample = ck.get_int(key + ".sample");
    pos.world_size = ck.get_int(key + ".world_size");
  }
  if (pos.epoch < 0 || pos.batch < 0 || (ck.has(key + ".sample") && pos.sample < 0) ||
      pos.world_size < 1)
    throw FormatError(fmt::format(
        "{}: loader '{}' has epoch {}, batch {}, sample {} and world_size {}; epoch, batch and "
        "sample must be >= 0, world_size >= 1",
        ck.source().empty() ? "<in-memory checkpoint>" : ck.source(), name, pos.epoch, pos.batch,
        pos.sample, pos.world_size));
  return pos;
}

}  // namespace nabla::io
