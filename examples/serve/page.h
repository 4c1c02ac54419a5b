// The page at "/": type a text (langid) or draw an image (vit), see the predicted label, every
// class's probability and a heatmap of the last layer's attention over the text's characters (or
// the image's patches). Inline HTML, CSS and JS only (no CDN: the server may have no internet).
// Loaded as /?selftest=<text> (langid) or /?selftest=<shape> (vit: trouser or tshirt, drawn
// on the canvas with pointer events) it submits through the button's code and writes
// "selftest: ok ..." or "selftest: failed ..." into #selftest, and for vit the 28x28 values it
// sent into #selftest's data-image, which the headless-chromium tests read (tests/serve).
#pragma once
#include <string>

#include "examples/serve/request.h"

namespace nabla::serve {

std::string page_html(ModelKind kind);

}  // namespace nabla::serve
