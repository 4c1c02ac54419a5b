// io::Checkpoint: one safetensors file holding everything a training run needs to resume bit for
// bit: named sections of tensors (model, optimizer, scheduler, anything else) and typed scalars
// (step, epoch, generator states, data-loader cursors, free-form strings).
//
// File layout (see docs/checkpoints.md):
//   tensors          "<section>.<name>", e.g. "model.0.weight", "optimizer.state.3.exp_avg"
//   __metadata__     "nabla.format":   "checkpoint/2"
//                    "nabla.sections": "model,optimizer,scheduler"  (put order; may list empty
//                    ones)
//                    "nabla.crc32":    CRC-32 of the whole file, this field's 8 hex digits
//                                      read as "00000000" (checkpoint_checksum)
//                    "nabla.threads":  num_threads() of the process that saved
//                    "nabla.version":  the nabla version that saved
//                    "<key>":          "<type>:<text>" for every scalar, type one of
//                                       int (int64, decimal), uint (uint64, decimal),
//                                       float (double, shortest text that reads back exactly),
//                                       str (any text)
// Scalars live in the metadata (not as 0-d tensors) so a checkpoint is readable with any JSON
// viewer and its sections hold nothing but the state dicts they were given.
//
// Saving is atomic (io::save_safetensors: temp file, fsync, rename), so a crash at any moment
// leaves the previous checkpoint or the new one. Loading validates the whole file first; every
// problem is a FormatError naming the file and the key. The checksum covers every byte, header
// included, so truncation, a flipped bit or a hand edit is a FormatError, never silent.
// A "checkpoint/1" file (written before checksums) still loads, with a warning; so does one
// saved with another thread count or nabla version (see warnings()).
//
// core knows nothing about nn/optim/data: sections take io::NamedTensors (what state_dict()
// returns) and a data-loader cursor is stored as plain integers (LoaderPosition).
#pragma once
#include <concepts>
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "nabla/core/generator.h"
#include "nabla/core/io/safetensors.h"

namespace nabla::io {

class Checkpoint {
 public:
  using Value = std::variant<int64_t, uint64_t, double, std::string>;

  Checkpoint() = default;

  // --- sections ---------------------------------------------------------------------------
  // Stores `tensors` as section `name` (non-empty, no '.' or ','), replacing a section of that
  // name. The handles are kept, not copied: save() writes the values they hold at that time.
  void put_section(const std::string& name, NamedTensors tensors);
  bool has_section(const std::string& name) const;
  // The section's tensors with the "<name>." prefix stripped; FormatError if there is none.
  const NamedTensors& section(const std::string& name) const;
  // Section names in the order they were put (or stored in the file).
  std::vector<std::string> section_names() const;

  // --- scalars (keys: non-empty, not starting with "nabla.") --------------------------------
  template <std::integral I>
  void set(const std::string& key, I value) {
    if constexpr (std::is_signed_v<I> || std::is_same_v<I, bool>)
      set_value(key, static_cast<int64_t>(value));
    else
      set_value(key, static_cast<uint64_t>(value));
  }
  void set(const std::string& key, double value) { set_value(key, value); }
  void set(const std::string& key, std::string value) { set_value(key, std::move(value)); }
  void set(const std::string& key, const char* value) { set_value(key, std::string(value)); }

  bool has(const std::string& key) const;
  // Typed getters: FormatError naming the file and key when the key is missing or holds another
  // type. get_int also accepts a uint that fits, get_uint a non-negative int, get_float an int.
  int64_t get_int(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;
  double get_float(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  // Every scalar key, sorted.
  std::vector<std::string> keys() const;

  // --- files ------------------------------------------------------------------------------
  // Writes the checkpoint atomically.
  void save(const std::string& path) const;
  // The file contents save() would write.
  std::string serialize() const;
  // Reads and validates a checkpoint file (IOError if it cannot be read, FormatError if it is
  // not a valid nabla checkpoint).
  static Checkpoint load(const std::string& path);
  // Validates an in-memory file; `source` names it in error messages.
  static Checkpoint parse(const std::string& bytes, const std::string& source);

  // The file this checkpoint was loaded from ("" for one built in memory).
  const std::string& source() const { return source_; }
  // What loading noticed but accepted (also printed to stderr): no checksum (checkpoint/1),
  // another thread count (resuming will not be bit for bit), another nabla version.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  struct Section {
    std::string name;
    NamedTensors tensors;
  };
  void set_value(const std::string& key, Value value);
  const Value& value(const std::string& key, const char* wanted) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  static Checkpoint from_file(SafetensorsFile file, const std::string& bytes);
  void warn(std::string message);

  std::string source_;
  std::vector<Section> sections_;
  std::map<std::string, Value> values_;
  std::vector<std::string> warnings_;
};

// The CRC-32 (zlib's) that the "nabla.crc32" field of a checkpoint file must hold: over every
// byte of `bytes` with that field's 8 hex digits read as '0'. FormatError naming `source` if the
// field is not there exactly once. For tools that edit a checkpoint on purpose and reseal it.
uint32_t checkpoint_checksum(const std::string& bytes, const std::string& source);
// The version of nabla this library was built from ("0.1.0").
const char* nabla_version();

// Stores a generator's (seed, offset) as "generator.<name>.seed" / ".offset" (uint).
void save_generator(Checkpoint& ck, const std::string& name, const Generator& gen);
// Restores it: the generator continues exactly where the saved one stopped.
void load_generator(const Checkpoint& ck, const std::string& name, Generator& gen);

// A data-loader position (data::LoaderCursor is this struct). `sample` is global: how many
// positions of the epoch's order all ranks together have consumed, so a run saved by N processes
// resumes on any number at the same sample (data/dataloader.h).
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch = 0;       // batches this rank handed out in the epoch
  int64_t sample = -1;     // -1: not recorded (a position from before sharding)
  int64_t world_size = 1;  // processes of the run that saved
};
// Stores it as "loader.<name>.epoch" / ".batch" (int), and ".sample" / ".world_size" (int) when
// sample is recorded.
void save_loader_position(Checkpoint& ck, const std::string& name, LoaderPosition pos);
// Reads it back (sample -1 and world_size 1 when the file has no ".sample"); FormatError if a key
// is missing or a value is out of range.
LoaderPosition load_loader_position(const Checkpoint& ck, const std::string& name);

}  // namespace nabla::io
