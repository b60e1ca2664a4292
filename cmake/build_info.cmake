# Version, git commit and build options, compiled into `megatron --version`.
find_package(Git QUIET)
set(MEGATRON_GIT_COMMIT "unknown")
if(GIT_FOUND)
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
                  WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}"
                  OUTPUT_VARIABLE _commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND _commit)
    set(MEGATRON_GIT_COMMIT "${_commit}")
    execute_process(COMMAND "${GIT_EXECUTABLE}" status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${CMAKE_SOURCE_DIR}"
                    OUTPUT_VARIABLE _dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_dirty)
      string(APPEND MEGATRON_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()
set(MEGATRON_BUILD_CUDA "${MEGATRON_WITH_CUDA}")
configure_file("${CMAKE_SOURCE_DIR}/src/core/build_info.cpp.in"
               "${CMAKE_BINARY_DIR}/generated/build_info.cpp" @ONLY)
