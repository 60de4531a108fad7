/* memarea's AML drop-in: AML_INNER_MALLOC and friends (aml/utils/inner-malloc.h). */
#ifndef AML_INNER_MALLOC_H
#define AML_INNER_MALLOC_H
/* Written by the next commit. */
#endif /* AML_INNER_MALLOC_H */
