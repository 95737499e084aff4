#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""mlaccel.tasks.report_first_step outside and inside taskd."""


from mlaccel import tasks

from tests import testcase


class TestReportFirstStep(testcase.TestCase):

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
