// render_dot / write_graph through Graphviz's gvc and cgraph (see render.h).
#include "nabla/core/inspect/render.h"

#include <fmt/format.h>
#include <gvc.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "nabla/core/error.h"

namespace nabla::inspect {

namespace {

std::mutex graphviz_mutex;  // cgraph's error hooks and gvc's plugin tables are global
std::string graphviz_errors;

int capture_error(char* message) {
  graphviz_errors += message;
  return 0;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// One context for the process, never freed: Graphviz 2.43's pango plugin caches a pointer to the
// last font name, which lives in the context's font table, so freeing a context and rendering
// with the next one reads freed memory (found by AddressSanitizer).
GVC_t* context() {
  static GVC_t* gvc = gvContext();
  return gvc;
}

// The graph of one render and cgraph's error hook, released in reverse order.
struct Session {
  GVC_t* gvc = nullptr;
  Agraph_t* graph = nullptr;
  bool laid_out = false;
  agusererrf previous_handler = nullptr;
  Session() : previous_handler(agseterrf(capture_error)) { graphviz_errors.clear(); }
  ~Session() {
    if (laid_out) gvFreeLayout(gvc, graph);
    if (graph) agclose(graph);
    agseterrf(previous_handler);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

}  // namespace

std::string render_dot(const std::string& dot, const std::string& format) {
  if (format.empty()) throw ValueError("render_dot: empty output format");
  std::lock_guard lock(graphviz_mutex);
  Session s;
  s.gvc = context();
  if (!s.gvc) throw Error("render_dot: Graphviz could not create a context (gvContext failed)");
  s.graph = agmemread(dot.c_str());
  if (!s.graph)
    throw ValueError(fmt::format("render_dot: Graphviz could not parse the DOT text ({} bytes): {}",
                                 dot.size(), trimmed(graphviz_errors)));
  if (gvLayout(s.gvc, s.graph, "dot") != 0)
    throw Error(fmt::format(
        "render_dot: Graphviz's 'dot' layout failed or is not installed (the libgvc plugins; "
        "run scripts/setup.sh): {}",
        trimmed(graphviz_errors)));
  s.laid_out = true;
  char* data = nullptr;
  unsigned int length = 0;
  if (gvRenderData(s.gvc, s.graph, format.c_str(), &data, &length) != 0 || !data) {
    if (data) gvFreeRenderData(data);
    throw Error(fmt::format(
        "render_dot: Graphviz cannot render format '{}' (no render plugin for it; Debian's "
        "libgvc6 provides svg and png): {}",
        format, trimmed(graphviz_errors)));
  }
  std::string out(data, length);
  gvFreeRenderData(data);
  return out;
}

void write_graph(const std::string& dot, const std::string& path) {
  const size_t dot_pos = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot_pos == std::string::npos || (slash != std::string::npos && dot_pos < slash))
    throw ValueError(fmt::format(
        "write_graph: '{}' has no extension to choose the format (.svg, .png, .dot)", path));
  const std::string format = path.substr(dot_pos + 1);
  const std::string bytes = format == "dot" ? dot : render_dot(dot, format);
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file)
    throw IOError(
        fmt::format("write_graph: cannot open '{}' for writing: {}", path, std::strerror(errno)));
  if (std::fwrite(bytes.data(), 1, bytes.size(), file.get()) != bytes.size() ||
      std::fflush(file.get()) != 0)
    throw IOError(fmt::format("write_graph: writing {} bytes to '{}' failed: {}", bytes.size(),
                              path, std::strerror(errno)));
}

}  // namespace nabla::inspect
