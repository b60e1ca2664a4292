# CUDA toolchain wiring: MEGATRON_CUDA=AUTO builds the CUDA parts whenever nvcc is found.
# Binaries link the CUDA runtime only (never libcuda), so a CUDA build still starts and runs
# its CPU work on machines without a driver.
set(MEGATRON_WITH_CUDA OFF)
if(NOT MEGATRON_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(_megatron_nvcc nvcc HINTS /usr/local/cuda/bin ENV CUDA_PATH PATH_SUFFIXES bin)
    if(_megatron_nvcc)
      set(CMAKE_CUDA_COMPILER "${_megatron_nvcc}")
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(MEGATRON_WITH_CUDA ON)
  elseif(MEGATRON_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MEGATRON_CUDA=ON but no CUDA compiler (nvcc) was found; "
                        "install the CUDA toolkit or configure with -DMEGATRON_CUDA=OFF")
  endif()
endif()

if(MEGATRON_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # Ampere (A100) and Hopper (H100/H200); `native` fails on machines without a GPU.
    set(CMAKE_CUDA_ARCHITECTURES "80;90")
  endif()
  # CMake 3.25 does not know nvcc's C++20 flag yet.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # NCCL ships beside the toolkit (or in /usr) without a CMake package: an imported target.
  find_path(MEGATRON_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(MEGATRON_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR}
               "${CUDAToolkit_LIBRARY_ROOT}" PATH_SUFFIXES lib lib64)
  if(NOT MEGATRON_NCCL_INCLUDE_DIR OR NOT MEGATRON_NCCL_LIBRARY)
    message(FATAL_ERROR "CUDA builds need NCCL (nccl.h and libnccl): install libnccl-dev or "
                        "NVIDIA's NCCL package, or configure with -DMEGATRON_CUDA=OFF")
  endif()
  add_library(megatron::nccl UNKNOWN IMPORTED)
  set_target_properties(megatron::nccl PROPERTIES IMPORTED_LOCATION "${MEGATRON_NCCL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${MEGATRON_NCCL_INCLUDE_DIR}")
  message(STATUS "megatron: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "megatron: CUDA backend OFF")
endif()

# cuDNN attention (src/tensor/cuda_cudnn_attention.cpp): the toolkit's cuDNN headers and
# cudnn-frontend's header-only graph API, which scripts/install-deps.sh fetches from NVIDIA's
# PyPI wheel into .cache/ (nothing of NVIDIA's is committed). The frontend loads libcudnn at run
# time (dynamic loading), so a CUDA build still starts where cuDNN is missing and keeps the flash
# kernels there.
set(MEGATRON_CUDNN_FRONTEND_VERSION 1.32.0)
set(MEGATRON_WITH_CUDNN OFF)
if(MEGATRON_WITH_CUDA)
  find_path(MEGATRON_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_path(MEGATRON_CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h
            HINTS "${CMAKE_SOURCE_DIR}/.cache/cudnn-frontend-${MEGATRON_CUDNN_FRONTEND_VERSION}/include"
            NO_DEFAULT_PATH)
  if(MEGATRON_CUDNN_INCLUDE_DIR AND MEGATRON_CUDNN_FRONTEND_INCLUDE_DIR)
    set(MEGATRON_WITH_CUDNN ON)
    add_library(megatron::cudnn_frontend INTERFACE IMPORTED)
    set_target_properties(megatron::cudnn_frontend PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${MEGATRON_CUDNN_FRONTEND_INCLUDE_DIR};${MEGATRON_CUDNN_INCLUDE_DIR}"
      INTERFACE_COMPILE_DEFINITIONS "MEGATRON_WITH_CUDNN=1;NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING=1"
      INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
    message(STATUS "megatron: cuDNN attention ON (cudnn-frontend ${MEGATRON_CUDNN_FRONTEND_VERSION})")
  else()
    message(STATUS "megatron: cuDNN attention OFF (run scripts/install-deps.sh for cudnn-frontend's "
                   "headers); the flash kernels serve every dtype")
  endif()
endif()
