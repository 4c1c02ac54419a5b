#include "examples/common/cli.h"

#include <CLI/CLI.hpp>

namespace nabla::examples {

CommandLine::CommandLine(const std::string& description)
    : app_(std::make_unique<CLI::App>(description)) {}

CommandLine::~CommandLine() = default;

CommandLine& CommandLine::option(const std::string& name, int& value, const std::string& help) {
  app_->add_option(name, value, help)->capture_default_str();
  return *this;
}

CommandLine& CommandLine::option(const std::string& name, int64_t& value, const std::string& help) {
  app_->add_option(name, value, help)->capture_default_str();
  return *this;
}

CommandLine& CommandLine::option(const std::string& name, uint64_t& value,
                                 const std::string& help) {
  app_->add_option(name, value, help)->capture_default_str();
  return *this;
}

CommandLine& CommandLine::option(const std::string& name, double& value, const std::string& help) {
  app_->add_option(name, value, help)->capture_default_str();
  return *this;
}

CommandLine& CommandLine::option(const std::string& name, std::string& value,
                                 const std::string& help) {
  app_->add_option(name, value, help)->capture_default_str();
  return *this;
}

CommandLine& CommandLine::choice(const std::string& name, std::string& value,
                                 const std::vector<std::string>& allowed, const std::string& help) {
  app_->add_option(name, value, help)->capture_default_str()->check(CLI::IsMember(allowed));
  return *this;
}

CommandLine& CommandLine::flag(const std::string& name, bool& value, const std::string& help) {
  app_->add_flag(name, value, help);
  return *this;
}

CommandLine& CommandLine::run_flags(uint64_t& seed, std::string& out, int& threads, bool& resume,
                                    bool& smoke, int64_t& stop_after,
                                    const std::string& smoke_help) {
  return option("--seed", seed, "seed for data order, init, dropout and shuffling")
      .option("--out", out, "output directory (metrics, plots, checkpoint)")
      .option("--threads", threads, "threads (default: OMP_NUM_THREADS or all cores)")
      .flag("--resume", resume, "continue from <out>/checkpoint.safetensors")
      .flag("--smoke", smoke, smoke_help)
      .option("--stop-after", stop_after,
              "stop (as if interrupted) at the first checkpoint at or after this step");
}

std::optional<int> CommandLine::parse(int argc, char** argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app_->exit(e);
  }
  return std::nullopt;
}

}  // namespace nabla::examples
