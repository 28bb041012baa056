"""Plug-ins that put the curriculum (:class:`curriculum.loop.curriculum.Curriculum`) into other trainers' own hooks."""
