// The page at "/": type a text (langid) or draw an image (vit), see the predicted label, every
// class's probability and a heatmap of the last layer's attention over the text's characters (or
// the image's patches). Inline HTML, CSS and JS only (no CDN: the server may have no internet).
// Loaded as /?selftest=<text> it submits that text itself and writes "selftest: ok ..." or
// "selftest: failed ..." into #selftest, which the headless-chromium test reads.
#pragma once
#include <string>

#include "examples/serve/request.h"

namespace nabla::serve {

std::string page_html(ModelKind kind);

}  // namespace nabla::serve
