/* Single-op ORT cases for the math family (see opcase.h). */
#include "opcase.h"

const opcase opcases_math[] = {
    {0},
};
