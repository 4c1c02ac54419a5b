// The King James Bible as character data, from Debian's bible-kjv package: `bible -f -l 100000
// "Gen1:1-Rev22:21"` prints one verse a line ("Ge1:1 In the beginning ..."). The verse references
// are stripped; every verse is kept as one line ending in '\n'. Chapters are numbered from
// Genesis 1 = 1 to Revelation 22 = 1189; those whose number is a multiple of 20 are the
// validation split (59 chapters, 202,035 characters), the others training (3,935,815
// characters, 63 distinct), as issue 20 fixes them.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nabla/core/tensor.h"

namespace char_gpt {

struct Corpus {
  std::string train, validation;  // verses, each followed by '\n'
  int64_t chapters = 0, validation_chapters = 0;
};

// Every validation_every-th chapter goes to validation.
constexpr int64_t kValidationEvery = 20;

// Splits the text `bible -f` prints (one "<Book><chapter>:<verse> <text>" per line). A line
// without a reference is a nabla::FormatError naming its line number.
Corpus split_bible_listing(std::string_view listing);

// Runs `bible` (Debian's bible-kjv) and splits its output. Without the program: a nabla::Error
// naming the package and scripts/setup.sh.
Corpus load_kjv(const std::string& program = "bible");

// Scoring a text of `characters` characters with a model of `context` positions, every
// character once, each with at least context / 2 characters before it except in the first
// window: windows of `context` tokens start every context / 2 positions, and each scores only
// the positions the previous window did not (the last window ends at the text's end). The text
// is preceded by one token ('\n', a verse start), so its first character is predicted too:
// window w's tokens are sequence[start, start + context), its targets one further, where
// sequence = '\n' + text.
struct ScoredWindow {
  int64_t start;        // first token of the window in the '\n'-prefixed sequence
  int64_t first_score;  // first scored position within the window
};
std::vector<ScoredWindow> scored_windows(int64_t characters, int64_t context);

// The characters of a text, sorted by byte value; a character's id is its rank.
class Vocabulary {
 public:
  explicit Vocabulary(std::string_view text);
  int64_t size() const { return static_cast<int64_t>(chars_.size()); }
  const std::string& chars() const { return chars_; }
  // Ids of every byte of text. A byte outside the vocabulary is a nabla::ValueError naming the
  // byte, its offset and `what` (e.g. "--prompt").
  std::vector<int64_t> encode(std::string_view text, std::string_view what) const;
  // The same as an int64 tensor of shape (text.size()).
  nabla::Tensor encode_tensor(std::string_view text, std::string_view what) const;
  std::string decode(const std::vector<int64_t>& ids) const;

 private:
  std::string chars_;
  std::array<int16_t, 256> id_of_{};  // -1: not in the vocabulary
};

}  // namespace char_gpt
