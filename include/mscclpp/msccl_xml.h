/* mscclpp/msccl_xml.h - MSCCL XML algorithm files (the format of microsoft/msccl) as a plan
 * source: conversion to our execution-plan JSON and MSCCL's selection rule. Compiles as C11 and
 * as C++. See docs/msccl-xml.md for the format, the conversion and the rule. */
#ifndef MSCCLPP_MSCCL_XML_H_
#define MSCCLPP_MSCCL_XML_H_

#include <mscclpp/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads, checks and converts the MSCCL XML algorithm at `path` into plan JSON text. On success
 * *json is a NUL-terminated string the caller releases with free(), and *len (if len is not NULL)
 * its length. A bad file fails with mscclppInvalidArgument and a last error naming the file, line,
 * element and attribute. */
mscclppResult_t mscclppMscclXmlToPlanJson(const char* path, char** json, size_t* len);

/* Adds the algorithm at `path` to the process-wide set used by mscclppMscclXmlSelect. */
mscclppResult_t mscclppMscclXmlLoad(const char* path);

/* Adds every file of MSCCL_XML_FILES (colon-separated paths, MSCCL's variable, no MSCCLPP_ prefix)
 * to the set; unset or empty loads nothing. *nloaded (may be NULL) gets how many were added. The
 * first bad file fails the call (files before it stay loaded). */
mscclppResult_t mscclppMscclXmlLoadFromEnv(int* nloaded);

/* Removes every loaded algorithm. */
mscclppResult_t mscclppMscclXmlClear(void);

/* MSCCL's rule: the first loaded algorithm (in load order) whose collective is `coll`, whose
 * inplace flag equals `inplace`, whose ngpus equals `nranks`, whose chunks per loop divide the
 * element count (count x nranks for allgather, reducescatter, alltoall), and whose
 * minBytes <= bytes < maxBytes (bytes = that element count x typeSize); `redop` must be "sum",
 * "prod", "max" or "min" (NULL means sum). *index gets its index, or -1 when none serves. `count`
 * is the per-rank count as the NCCL API takes it. */
mscclppResult_t mscclppMscclXmlSelect(const char* coll, size_t count, size_t typeSize, int nranks, int inplace,
                                      const char* redop, int* index);

/* The name and plan JSON (release with free()) of loaded algorithm `index`; name may be NULL. */
mscclppResult_t mscclppMscclXmlGetPlan(int index, char* name, size_t nameLen, char** json, size_t* len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MSCCLPP_MSCCL_XML_H_ */
