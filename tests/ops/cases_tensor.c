/* Single-op ORT cases for the tensor family (see opcase.h). */
#include "opcase.h"

const opcase opcases_tensor[] = {
    {0},
};
