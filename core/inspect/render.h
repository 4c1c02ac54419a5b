// Rendering DOT text (dot.h) to SVG, PNG or any other Graphviz output format, in-process through
// Graphviz's C libraries (cgraph parses, gvc lays out with `dot` and renders); nothing is run in a
// shell. Graphviz's own error messages are caught and returned inside the exception.
#pragma once
#include <string>

namespace nabla::inspect {

// The rendered bytes. Throws ValueError if Graphviz cannot parse `dot`, and Error if the `dot`
// layout or the format's render plugin is missing at run time (naming the format and what
// Graphviz said). Calls are serialised: Graphviz keeps global state.
std::string render_dot(const std::string& dot, const std::string& format);

// Renders to `path`, the format being the file's extension (".svg", ".png"; ".dot" writes the text
// itself). Throws IOError naming the path if it cannot be written.
void write_graph(const std::string& dot, const std::string& path);

}  // namespace nabla::inspect
