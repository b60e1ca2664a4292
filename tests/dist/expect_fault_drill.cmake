# Runs the fault drill under mpiexec and checks how the job ended (cmake -P, from ctest).
# -D MPIEXEC, DRILL, RANKS, TIMEOUT_MS, ITERATIONS: the job; FAULT: MEGATRON_FAULT or "";
# EXPECT: "success", or "watchdog": the job fails within MAX_SECONDS, and a rank other than
# HUNG_RANK printed the watchdog's line naming the dp group and ITERATION.
set(ENV{MEGATRON_FAULT} "${FAULT}")
string(TIMESTAMP started "%s")
execute_process(
  COMMAND "${MPIEXEC}" --allow-run-as-root --oversubscribe -n ${RANKS} "${DRILL}" ${TIMEOUT_MS}
          ${ITERATIONS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
string(TIMESTAMP finished "%s")
math(EXPR seconds "${finished} - ${started}")
message("mpiexec exited with ${rc} after ${seconds} s\n--- stdout\n${out}--- stderr\n${err}")

if(EXPECT STREQUAL "success")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the drill without a fault failed")
  endif()
  return()
endif()

if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job should have failed (exit status ${rc})")
endif()
if(seconds GREATER MAX_SECONDS)
  message(FATAL_ERROR "the job took ${seconds} s, more than ${MAX_SECONDS} s")
endif()
math(EXPR last "${RANKS} - 1")
set(line "megatron: error: rank ([0-9]+): all_reduce on group dp \\(${RANKS} ranks\\) did not complete within [0-9.]+ s at iteration ${ITERATION}: a peer rank died or is stuck")
string(REGEX MATCHALL "${line}" lines "${out}${err}")
if(NOT lines)
  message(FATAL_ERROR "no rank printed the watchdog's line")
endif()
foreach(found IN LISTS lines)
  string(REGEX MATCH "${line}" _ "${found}")
  if(CMAKE_MATCH_1 EQUAL HUNG_RANK OR CMAKE_MATCH_1 GREATER last)
    message(FATAL_ERROR "the watchdog line names rank ${CMAKE_MATCH_1}")
  endif()
endforeach()
