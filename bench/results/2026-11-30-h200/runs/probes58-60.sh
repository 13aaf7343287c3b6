#!/usr/bin/env bash
# Twelfth session, first five calls (one H200): the probes, built from the working tree over
# 66e98f1 with nvcc directly (the Bazel targets bench:multicast_probe, timeline_probe and
# timeline_probe_clean came after, at 9d42715, with the last versions' code), run from .gpu_stage/probe:
#   1. ./multicast_probe                               -> history/mcast58/multicast_probe.csv
#   2. ./timeline_probe, one cold launch a kernel      -> history/timeline58/timeline_standalone.csv
#   3. ./timeline_probe, 16 layers in a graph with PDL -> history/timeline58/timeline_graph.csv
#   4. ./timeline_probe_clean; ./timeline_probe: the 64 x 128 and 6-stage tiles with one and two
#      warpgroups                                      -> history/timeline59/{clean,stamped}.csv
#   5. the same with one, two and four warpgroups      -> history/timeline60/{clean,stamped}.csv
# (timeline_probe_clean: built with -DPROBE_NO_STAMPS, the kernels' own code.)
