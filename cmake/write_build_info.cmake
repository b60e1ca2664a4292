# Script mode (cmake -P): writes build_info.cpp from its template; configure_file leaves the
# file untouched when nothing changed, so builds stay incremental.
set(MEGATRON_GIT_COMMIT "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
                  WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE _commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND _commit)
    set(MEGATRON_GIT_COMMIT "${_commit}")
    execute_process(COMMAND "${GIT_EXECUTABLE}" status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${SOURCE_DIR}"
                    OUTPUT_VARIABLE _dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_dirty)
      string(APPEND MEGATRON_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()
set(CMAKE_CXX_COMPILER_ID_AND_VERSION "${COMPILER}")
set(CMAKE_CUDA_COMPILER_VERSION "${CUDA_VERSION}")
configure_file("${SOURCE_DIR}/src/core/build_info.cpp.in" "${OUTPUT}" @ONLY)
