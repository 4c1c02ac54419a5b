# oneDNN (Debian libdnnl-dev, the library PyTorch uses on CPU): the bf16 and int8 matmul primitives
# of ops/kernels/onednn.cpp. Optional: without it nabla still builds, and every entry point that
# needs it throws an error saying oneDNN is missing (onednn::available() tells in advance).
# Debian's dnnl-config.cmake calls find_package(OpenCL REQUIRED), which would stop the configure
# on a machine without OpenCL's headers: look for OpenCL first and treat oneDNN as missing without it.
find_package(OpenCL QUIET)
if(OpenCL_FOUND)
  find_package(dnnl CONFIG QUIET)
else()
  message(STATUS "nabla: OpenCL headers missing (ocl-icd-opencl-dev), so oneDNN's CMake package cannot load")
endif()
option(NABLA_WITH_ONEDNN "Use oneDNN for the bf16 and int8 matmuls (libdnnl-dev)" ${dnnl_FOUND})
if(NABLA_WITH_ONEDNN AND NOT dnnl_FOUND)
  message(FATAL_ERROR "NABLA_WITH_ONEDNN=ON but oneDNN was not found: run scripts/setup.sh "
                      "(apt-get install libdnnl-dev) or configure with -DNABLA_WITH_ONEDNN=OFF")
endif()
message(STATUS "nabla: oneDNN backend ${NABLA_WITH_ONEDNN}")
