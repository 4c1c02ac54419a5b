// Command-line flags for the example trainers. A thin wrapper over CLI11 so that only cli.cpp
// compiles CLI11's header-only code (~17 s per translation unit at -O2), not every example.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace nabla::examples {

class CommandLine {
 public:
  explicit CommandLine(const std::string& description);
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // `--name value`; the variable's current value is the default shown by --help.
  CommandLine& option(const std::string& name, int& value, const std::string& help);
  CommandLine& option(const std::string& name, int64_t& value, const std::string& help);
  CommandLine& option(const std::string& name, uint64_t& value, const std::string& help);
  CommandLine& option(const std::string& name, double& value, const std::string& help);
  CommandLine& option(const std::string& name, std::string& value, const std::string& help);
  // A string option that must be one of `allowed`.
  CommandLine& choice(const std::string& name, std::string& value,
                      const std::vector<std::string>& allowed, const std::string& help);
  // `--name` alone sets value to true.
  CommandLine& flag(const std::string& name, bool& value, const std::string& help);

  // The flags every trainer shares: --seed, --out, --threads, --resume, --smoke (described by
  // smoke_help) and --stop-after.
  CommandLine& run_flags(uint64_t& seed, std::string& out, int& threads, bool& resume, bool& smoke,
                         int64_t& stop_after, const std::string& smoke_help);

  // Parses argv. Returns the exit code when the program should stop now (--help printed: 0; bad
  // flags, reported on stderr: non-zero), std::nullopt when it should go on.
  std::optional<int> parse(int argc, char** argv);

 private:
  std::unique_ptr<CLI::App> app_;
};

}  // namespace nabla::examples
