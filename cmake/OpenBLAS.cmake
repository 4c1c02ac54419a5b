# OpenBLAS, the OpenMP build, linked by full path with an rpath to its directory. The pthread
# build would start its own thread pool that fights our OpenMP loops (measured 3-7x slower).
set(NABLA_OPENBLAS_DIR "/usr/lib/x86_64-linux-gnu/openblas-openmp" CACHE PATH
    "Directory of the OpenMP build of OpenBLAS")
set(NABLA_OPENBLAS_INCLUDE "/usr/include/x86_64-linux-gnu/openblas-openmp" CACHE PATH
    "Include directory of the OpenMP build of OpenBLAS")
if(NOT EXISTS "${NABLA_OPENBLAS_DIR}/libopenblas.so" OR
   NOT EXISTS "${NABLA_OPENBLAS_INCLUDE}/cblas.h")
  message(FATAL_ERROR "OpenBLAS (OpenMP build) not found in ${NABLA_OPENBLAS_DIR}: "
                      "run scripts/setup.sh or apt-get install libopenblas-openmp-dev")
endif()
add_library(nabla_openblas INTERFACE)
target_include_directories(nabla_openblas SYSTEM INTERFACE "${NABLA_OPENBLAS_INCLUDE}")
target_link_libraries(nabla_openblas INTERFACE "${NABLA_OPENBLAS_DIR}/libopenblas.so")
target_link_options(nabla_openblas INTERFACE "-Wl,-rpath,${NABLA_OPENBLAS_DIR}")
