# Third-party libraries, all from Debian packages (scripts/install-deps.sh installs them).
find_package(yaml-cpp REQUIRED)
if(NOT TARGET yaml-cpp::yaml-cpp)
  # yaml-cpp 0.7 exports only `yaml-cpp`; 0.8 and later export the namespaced target.
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()
find_package(CLI11 REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Threads REQUIRED)
find_package(simdjson REQUIRED)
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
# tokenizer.json's Split and Replace patterns: PCRE2 (Unicode properties, look-ahead). Not
# Oniguruma, which `tokenizers` uses: Debian's libonig exports regcomp/regexec under the POSIX
# names and would take them over from glibc for the whole process.
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# Checkpoints: Debian's serial HDF5 (libhdf5-dev), 1.10 or later for virtual datasets.
pkg_check_modules(HDF5 REQUIRED IMPORTED_TARGET hdf5>=1.10)
# `megatron serve`'s HTTP layer: Boost.Beast over Boost.Asio, header-only (libboost-dev).
find_package(Boost 1.74 REQUIRED)
# The serve tests' HTTP client: Debian's cpp-httplib (libcpp-httplib-dev), a compiled library.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)

# The CPU backend's GEMMs. Debian's OpenMP build of OpenBLAS shares the backend's OpenMP
# thread pool; the pthread build would start its own threads beside OpenMP's waiting ones and
# oversubscribe the cores (measured: a third of the time lost spinning on 2 cores).
set(ENV{PKG_CONFIG_PATH}
    "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp/pkgconfig:$ENV{PKG_CONFIG_PATH}")
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
if(NOT OPENBLAS_LIBRARY_DIRS MATCHES "openmp")
  message(WARNING "OpenBLAS is not the OpenMP build (${OPENBLAS_LIBRARY_DIRS}): install "
                  "libopenblas-openmp-dev, or training will oversubscribe the cores")
endif()
set(MEGATRON_BLAS "OpenBLAS ${OPENBLAS_VERSION}")
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(MPI REQUIRED COMPONENTS CXX)
set(MEGATRON_MPI "none")
if(MPI_CXX_FOUND)
  set(MEGATRON_MPI "MPI ${MPI_CXX_VERSION}")
  if(MPIEXEC_EXECUTABLE)
    execute_process(COMMAND "${MPIEXEC_EXECUTABLE}" --version OUTPUT_VARIABLE _mpi_version
                    ERROR_QUIET RESULT_VARIABLE _mpi_rc)
    # Open MPI's launcher answers "mpiexec (OpenRTE) 4.1.4" (or "(Open MPI)" in 5.x).
    string(REGEX MATCH "\\(Open(RTE| MPI)\\) ([0-9.]+)" _mpi_match "${_mpi_version}")
    if(_mpi_rc EQUAL 0 AND CMAKE_MATCH_2)
      set(MEGATRON_MPI "Open MPI ${CMAKE_MATCH_2} (MPI ${MPI_CXX_VERSION})")
    endif()
  endif()
endif()
