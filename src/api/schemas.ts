import { Type } from '@sinclair/typebox';

export const ErrorDetailSchema = Type.Object({ code: Type.String(), message: Type.String() });
export const ErrorBodySchema = Type.Object({
  code: Type.String(),
  message: Type.String(),
  details: Type.Optional(Type.Array(ErrorDetailSchema)),
  inner_error: Type.Optional(ErrorDetailSchema),
});
