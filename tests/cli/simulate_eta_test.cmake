# `berth simulate --eta-every-seconds` on the shipped seed-stories workload through the real
# binary: the ETA accuracy table is printed, report.json carries the study, every prediction was
# compared with a simulated start, and with exact run times the median error is at most a tenth
# of the mean wait (the goal in docs/simulate.md, "ETA accuracy").
file(REMOVE_RECURSE ${OUT})
execute_process(
  COMMAND ${BERTH} simulate --cluster ${SOURCE}/bench/workloads/seed-stories.cluster.json
          --workload ${SOURCE}/bench/workloads/seed-stories.yaml --out ${OUT} --baseline=false
          --eta-every-seconds 60
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "berth simulate exited ${rc}:\n${out}\n${err}")
endif()
foreach(row "ETA accuracy \\(durations known exactly" "median \\|error\\|" "p90 \\|error\\|" "median / mean wait"
            "ETA error by lead" "0 to 10 min" "3 h or more")
  if(NOT out MATCHES "${row}")
    message(FATAL_ERROR "the summary lacks \"${row}\":\n${out}")
  endif()
endforeach()
file(READ ${OUT}/report.json report)
string(JSON predictions GET "${report}" eta predictions)
string(JSON passes GET "${report}" eta passes)
string(JSON never GET "${report}" eta neverStarted)
string(JSON median GET "${report}" eta medianErrorSeconds)
string(JSON wait GET "${report}" eta meanWaitSeconds)
if(predictions LESS 100 OR passes LESS 50)
  message(FATAL_ERROR "too few predictions (${predictions}) or passes (${passes}):\n${out}")
endif()
# Every prediction compared falls in one lead bucket.
string(JSON leads LENGTH "${report}" eta byLead)
if(NOT leads EQUAL 5)
  message(FATAL_ERROR "eta.byLead has ${leads} buckets, not 5:\n${report}")
endif()
set(in_leads 0)
foreach(i RANGE 4)
  string(JSON n GET "${report}" eta byLead ${i} predictions)
  math(EXPR in_leads "${in_leads} + ${n}")
endforeach()
if(NOT in_leads EQUAL predictions)
  message(FATAL_ERROR "the lead buckets hold ${in_leads} predictions, the study compared ${predictions}")
endif()
if(NOT never EQUAL 0)
  message(FATAL_ERROR "${never} predictions were for jobs that never started:\n${out}")
endif()
# Whole seconds are precise enough here (CMake's math has no fractions).
string(REGEX REPLACE "\\..*" "" wait_s "${wait}")
string(REGEX REPLACE "\\..*" "" median_s "${median}")
math(EXPR median_x10 "${median_s} * 10")
if(median_x10 GREATER wait_s)
  message(FATAL_ERROR "median error ${median}s is more than a tenth of the mean wait ${wait}s:\n${out}")
endif()
