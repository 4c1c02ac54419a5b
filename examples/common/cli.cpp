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

std::optional<int> CommandLine::parse(int argc, char** argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app_->exit(e);
  }
  return std::nullopt;
}

}  // namespace nabla::examples
