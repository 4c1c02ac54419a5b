# Graphviz's C libraries (cgraph + gvc) for rendering autograd graphs to SVG/PNG in-process
# (core/inspect/render.cpp). Linked by full path like OpenBLAS, so the installed package needs no
# pkg-config at the user's end.
find_package(PkgConfig REQUIRED)
pkg_check_modules(NABLA_GVC REQUIRED libgvc libcgraph)
add_library(nabla_graphviz INTERFACE)
target_include_directories(nabla_graphviz SYSTEM INTERFACE ${NABLA_GVC_INCLUDE_DIRS})
target_link_libraries(nabla_graphviz INTERFACE ${NABLA_GVC_LINK_LIBRARIES})
