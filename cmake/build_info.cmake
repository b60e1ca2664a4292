# Version, git commit and build options, compiled into `megatron --version`. The commit is
# read at every build (not only at configure time), so the binary never names a stale one.
set(MEGATRON_BUILD_INFO_CPP "${CMAKE_BINARY_DIR}/generated/build_info.cpp")
add_custom_target(megatron_build_info
  COMMAND "${CMAKE_COMMAND}"
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${MEGATRON_BUILD_INFO_CPP}
          -DPROJECT_VERSION=${PROJECT_VERSION}
          -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}
          "-DCOMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
          -DMEGATRON_BUILD_CUDA=${MEGATRON_WITH_CUDA}
          -DCUDA_VERSION=${CMAKE_CUDA_COMPILER_VERSION}
          -DMEGATRON_BLAS=${MEGATRON_BLAS}
          "-DMEGATRON_MPI=${MEGATRON_MPI}"
          -P "${CMAKE_SOURCE_DIR}/cmake/write_build_info.cmake"
  BYPRODUCTS "${MEGATRON_BUILD_INFO_CPP}"
  COMMENT "Recording version and git commit"
  VERBATIM)
