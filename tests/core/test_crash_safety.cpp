// A process killed with SIGKILL at a random moment while saving always leaves a file that loads
// as exactly the old state or the new one (atomic_write: temp file, fsync, rename).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "nabla/core/io/safetensors.h"
#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

io::NamedTensors state(int version) {
  // Large enough (about 4 MB) that a kill often lands in the middle of a write.
  return {{"weights", full({1000, 1000}, static_cast<double>(version))},
          {"step", scalar_tensor(static_cast<double>(version), kInt64)}};
}

}  // namespace

TEST_CASE("SIGKILL during checkpoint saves never leaves a corrupt file", "[core][io]") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nabla_crash_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  io::save_safetensors(path, state(0));
  Generator gen(5);
  int completed_kills = 0;
  for (int trial = 0; trial < 50; ++trial) {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // Child: keep overwriting the checkpoint with alternating states until killed.
      for (int v = 1;; ++v) io::save_safetensors(path, state(v % 2 == 0 ? 2 : 1));
    }
    const auto delay_us =
        static_cast<useconds_t>(1000 + gen.bits64(static_cast<uint64_t>(trial)) % 30000);
    ::usleep(delay_us);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFSIGNALED(status)) ++completed_kills;
    io::SafetensorsFile f = io::load_safetensors(path);  // must parse
    const int64_t step = f.at("step").item<int64_t>();
    INFO("trial " << trial << " step " << step);
    REQUIRE((step == 0 || step == 1 || step == 2));
    auto w = f.at("weights").to_vector<float>();
    REQUIRE(w.size() == 1000000);
    // Every element agrees with the step: never a mix of two saves.
    CHECK(std::all_of(w.begin(), w.end(), [&](float v) { return v == static_cast<float>(step); }));
  }
  CHECK(completed_kills == 50);
  std::filesystem::remove(path);
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
    if (e.path().string().rfind(path + ".tmp", 0) == 0) std::filesystem::remove(e.path());
}

}  // namespace NABLA_UNITY_ID
}  // namespace
