"""mlaccel.tasks.report_first_step outside and inside taskd."""

import testtools

from mlaccel import tasks


class TestReportFirstStep(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(tasks.bind_reporter, None)

    def test_without_taskd_only_remembers(self):
        tasks.bind_reporter(None)
        self.assertIsNone(tasks.first_step_at())
        when = tasks.report_first_step()
        self.assertEqual(when, tasks.first_step_at())

    def test_only_the_first_call_of_a_task_counts(self):
        events = []
        tasks.bind_reporter(events.append)
        first = tasks.report_first_step()
        self.assertEqual(first, tasks.report_first_step())
        self.assertEqual([{'event': 'first_step', 'at': first}], events)
        # A new task reports its own first step again.
        tasks.bind_reporter(events.append)
        self.assertIsNone(tasks.first_step_at())
        second = tasks.report_first_step()
        self.assertEqual(second, tasks.first_step_at())
        self.assertEqual([{'event': 'first_step', 'at': first},
                          {'event': 'first_step', 'at': second}], events)
