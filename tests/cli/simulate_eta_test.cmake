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
string(JSON knows GET "${report}" eta knowsArrivals)
if(knows)
  message(FATAL_ERROR "eta.knowsArrivals is ${knows} without --eta-knows-arrivals")
endif()

# The same study with every later arrival told to each pass (--eta-knows-arrivals): berth's own
# world is the same run, so the same predictions are compared, and knowing what arrives later
# makes them no worse in the median and better at the 90th percentile.
file(REMOVE_RECURSE ${OUT}-arrivals)
execute_process(
  COMMAND ${BERTH} simulate --cluster ${SOURCE}/bench/workloads/seed-stories.cluster.json
          --workload ${SOURCE}/bench/workloads/seed-stories.yaml --out ${OUT}-arrivals --baseline=false
          --eta-every-seconds 60 --eta-knows-arrivals
  RESULT_VARIABLE rc OUTPUT_VARIABLE told ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "berth simulate --eta-knows-arrivals exited ${rc}:\n${told}\n${err}")
endif()
foreach(row "every later arrival told to each pass" "ETA error by lead \\(each pass told every later arrival\\)")
  if(NOT told MATCHES "${row}")
    message(FATAL_ERROR "the summary lacks \"${row}\":\n${told}")
  endif()
endforeach()
file(READ ${OUT}-arrivals/report.json told_report)
string(JSON knows GET "${told_report}" eta knowsArrivals)
string(JSON told_predictions GET "${told_report}" eta predictions)
string(JSON told_median GET "${told_report}" eta medianErrorSeconds)
string(JSON p90 GET "${report}" eta p90ErrorSeconds)
string(JSON told_p90 GET "${told_report}" eta p90ErrorSeconds)
if(NOT knows OR NOT told_predictions EQUAL predictions)
  message(FATAL_ERROR "knowsArrivals ${knows}, ${told_predictions} predictions against ${predictions}")
endif()
if(told_median GREATER median OR NOT told_p90 LESS p90)
  message(FATAL_ERROR "told every arrival: median ${told_median}s (${median}s without), p90 ${told_p90}s (${p90}s)")
endif()
